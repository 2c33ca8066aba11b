//! The as-shipped suite: a private cluster with a real node (containerd, kubelet, kube-proxy;
//! see `kube_retention_e2e::node`), `make image`'s archive imported into the node's runtime and
//! `helm install` of `charts/kube-retention` with its defaults but the image. Every test talks
//! to the chart's pods only: no kube-retention host process runs.
//!
//! `make test-shipped` runs it (as root, after `make image` and the node's packages); the image
//! comes from `KUBE_RETENTION_IMAGE`, else `target/image/kube-retention.oci.tar`.

#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/support.rs"]
mod support;
#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/workloads.rs"]
mod workloads;

mod pods;
mod retention;

use std::path::PathBuf;
use std::process::ExitCode;

use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::ShippedImage;
use libtest_mimic::{Arguments, Trial};
use support::Env;

fn main() -> ExitCode {
    let arguments = Arguments::from_args();
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let archive = std::env::var_os("KUBE_RETENTION_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root.join("target/image/kube-retention.oci.tar"));
    let chart = repo_root.join("charts/kube-retention");
    let started = std::time::Instant::now();
    let env = ShippedImage::from_archive(&archive).and_then(|image| {
        Env::start_with(|layout| LocalCluster::up_with_node(layout, &image, &chart))
    });
    let env = match env {
        Ok(env) => env,
        Err(error) => {
            eprintln!("could not start the local cluster with its node: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "shipped: node Ready and the chart's pods Ready in {:.0?}",
        started.elapsed()
    );
    let mut tests: Vec<Trial> = pods::tests(&env);
    tests.extend(retention::tests(&env));
    let conclusion = libtest_mimic::run(&arguments, tests);
    env.stop();
    println!(
        "shipped: {} passed, {} failed",
        conclusion.num_passed, conclusion.num_failed
    );
    conclusion.exit_code()
}
