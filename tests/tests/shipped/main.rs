//! The as-shipped suite: a private cluster with a real node (containerd, kubelet, kube-proxy;
//! see `kube_retention_e2e::node`) and its own OCI registry, the release's image index and
//! packaged chart pushed there (skopeo, `helm push`), and `helm install oci://…` of the chart
//! into `retention-system` with its defaults but the image's repository; the node's containerd
//! pulls the image. Every test talks to the chart's pods only: no kube-retention host process
//! runs.
//!
//! `make test-shipped` runs it (as root, after `make release` and the node's packages) with
//! `KUBE_RETENTION_IMAGE` and `KUBE_RETENTION_CHART` naming the release's files; without them,
//! `make image`'s archive and the chart's folder, packaged.

#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/audit.rs"]
mod audit;
#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/cleaners/sink.rs"]
mod sink;
#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/support.rs"]
mod support;
#[allow(dead_code, reason = "shared with the e2e suite, which uses all of it")]
#[path = "../e2e/workloads.rs"]
mod workloads;

mod eviction;
mod failover;
mod health;
mod helm_test;
mod pods;
mod quickstart;
mod retention;
mod rotation;
mod settled;
mod sinks;
mod trickle;
mod uninstall;
mod upgrade;

use std::path::PathBuf;
use std::process::ExitCode;

use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::ShippedImage;
use kube_retention_e2e::node::Node;
use libtest_mimic::{Arguments, Trial};
use support::Env;

/// The image under test, as pushed to the node's registry: `KUBE_RETENTION_IMAGE`, else
/// `make image`'s archive.
pub fn shipped_image() -> anyhow::Result<ShippedImage> {
    let archive = std::env::var_os("KUBE_RETENTION_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/image/kube-retention.oci.tar"));
    ShippedImage::in_registry(&archive)
}

/// The chart pushed to the node's registry and installed from it: `KUBE_RETENTION_CHART` (the
/// release's packaged chart), else the chart's folder, packaged.
fn shipped_chart() -> PathBuf {
    std::env::var_os("KUBE_RETENTION_CHART")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("charts/kube-retention"))
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The host's iptables rules (iptables-save without comments and counters).
fn iptables_rules() -> Vec<String> {
    let saved = std::process::Command::new("iptables-save")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default();
    saved
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.split(" [").next().unwrap_or(line).to_owned())
        .collect()
}

fn main() -> ExitCode {
    let arguments = Arguments::from_args();
    let chart = shipped_chart();
    let host_rules = iptables_rules();
    let started = std::time::Instant::now();
    let env = shipped_image().and_then(|image| {
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
    tests.extend(helm_test::tests(&env));
    let mut conclusion = libtest_mimic::run(&arguments, tests);
    // Trials that upgrade the release or stop its pods run last, one at a time.
    let serial = Arguments {
        test_threads: Some(1),
        ..arguments.clone()
    };
    // First: its `helm upgrade --install` is the install's own, so changes nothing.
    let mut disruptive_tests = quickstart::disruptive_tests(&env);
    disruptive_tests.extend(sinks::disruptive_tests(&env));
    disruptive_tests.extend(failover::disruptive_tests(&env));
    disruptive_tests.extend(rotation::disruptive_tests(&env));
    disruptive_tests.extend(eviction::disruptive_tests(&env));
    disruptive_tests.extend(health::disruptive_tests(&env));
    disruptive_tests.extend(upgrade::disruptive_tests(&env));
    // Last: it removes the release.
    disruptive_tests.extend(uninstall::disruptive_tests(&env));
    let disruptive = libtest_mimic::run(&serial, disruptive_tests);
    conclusion.num_passed += disruptive.num_passed;
    conclusion.num_failed += disruptive.num_failed;
    conclusion.num_filtered_out += disruptive.num_filtered_out;
    if conclusion.num_failed > 0 {
        env.keep_logs("shipped");
    }
    let stopping = std::time::Instant::now();
    env.stop();
    println!("shipped: make down's work took {:.0?}", stopping.elapsed());
    // `make down` leaves nothing: no namespace, link, mount, cgroup or shim of the node, and
    // the host's iptables rules as they were before the node started.
    let mut left = Node::leftovers(&env.cluster.layout.state_dir)
        .unwrap_or_else(|error| vec![format!("could not look: {error:#}")]);
    if iptables_rules() != host_rules {
        left.push("iptables rules on the host changed".to_owned());
    }
    if left.is_empty() {
        println!("shipped: nothing of the node left after it stopped");
    } else {
        eprintln!("shipped: the node left behind: {}", left.join("; "));
        conclusion.num_failed += 1;
    }
    println!(
        "shipped: {} passed, {} failed",
        conclusion.num_passed, conclusion.num_failed
    );
    conclusion.exit_code()
}
