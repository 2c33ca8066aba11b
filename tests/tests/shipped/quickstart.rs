//! The README's quickstart, run verbatim: its `sh` blocks between the `quickstart` markers,
//! and before them the "your own registry" block, from the release's folder with `REGISTRY` the
//! node's registry. Tools as a reader has them: kubectl and Helm on `PATH`, the plugin from the
//! release's amd64 archive, an empty `HOME`, the admin kubeconfig in `KUBECONFIG`, and the
//! cluster's CA trusted (`SSL_CERT_FILE`, which Helm and skopeo honour) because the registry is
//! the suite's. The Job must complete, be explained, and be deleted; no step may warn that
//! kube-retention cannot act, nor may a RetentionPolicy for Jobs applied afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use kube_retention_e2e::node::registry;
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

/// What the webhook says when the controller may not act on what a setting governs.
const CANNOT_ACT: [&str; 3] = [
    "grant its controller",
    "cannot act on",
    "cannot delete this",
];

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "the_readme_quickstart_runs_verbatim_against_the_release_in_a_registry",
        quickstart,
    )]
}

/// The `sh` blocks between `<!-- {marker}:begin -->` and `<!-- {marker}:end -->`, joined.
fn readme_blocks(readme: &str, marker: &str) -> Result<String> {
    let (_, rest) = readme
        .split_once(&format!("<!-- {marker}:begin -->"))
        .with_context(|| format!("the README has no {marker} section"))?;
    let (section, _) = rest
        .split_once(&format!("<!-- {marker}:end -->"))
        .with_context(|| format!("the README's {marker} section has no end"))?;
    let mut script = String::new();
    let mut inside = false;
    for line in section.lines() {
        match (inside, line.trim_end()) {
            (false, "```sh") => inside = true,
            (true, "```") => inside = false,
            (true, _) => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    ensure!(
        !script.is_empty(),
        "the README's {marker} section has no sh block"
    );
    Ok(script)
}

fn release_folder() -> Result<PathBuf> {
    std::env::var_os("KUBE_RETENTION_DIST")
        .map(PathBuf::from)
        .context("KUBE_RETENTION_DIST: the folder `make release` wrote")
}

/// `bash -euo pipefail` running `script` in `dir` as a reader would; what it printed.
fn run_as_reader(ns: &TestNamespace, script: &str, dir: &Path, path: &str) -> Result<String> {
    let cluster = &ns.env.cluster;
    let home = tempfile::tempdir()?;
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home.path())
        .env("KUBECONFIG", cluster.layout.kubeconfig())
        .env("REGISTRY", registry::address())
        .env(
            "SSL_CERT_FILE",
            registry::ca_file(&cluster.layout.state_dir),
        )
        .output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(output.status.success(), "{script}\nfailed:\n{said}");
    Ok(said)
}

async fn quickstart(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let readme = std::fs::read_to_string(cluster.layout.repo_root.join("README.md"))?;
    let dist = release_folder()?;
    // The plugin as a reader installs it: from the release's archive.
    let bin = tempfile::tempdir()?;
    let archive = dist.join(format!(
        "kubectl-retention-{}-linux-amd64.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    kube_retention_e2e::run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(bin.path()),
    )?;
    // kubectl of the cluster's minor, and Helm.
    let path = format!(
        "{}:{}:{}:/usr/local/bin:/usr/bin:/bin",
        bin.path().display(),
        cluster.layout.kubernetes_bin.display(),
        cluster.layout.tools_bin.display()
    );
    let pushed = run_as_reader(&ns, &readme_blocks(&readme, "own-registry")?, &dist, &path)?;
    let work = tempfile::tempdir()?;
    let said = run_as_reader(
        &ns,
        &readme_blocks(&readme, "quickstart")?,
        work.path(),
        &path,
    )?;
    println!("{pushed}{said}");
    ensure!(
        said.contains("job.batch/hello condition met") && said.contains("ttl-after-succeeded"),
        "the quickstart did not show the Job complete and explained:\n{said}"
    );
    for warning in CANNOT_ACT {
        ensure!(!said.contains(warning), "the quickstart warned:\n{said}");
    }
    // A policy for the same Jobs: the controller can act on them, so no warning.
    let policy = "apiVersion: retention.dev/v1alpha1\nkind: RetentionPolicy\n\
                  metadata: {name: jobs, namespace: quickstart}\n\
                  spec:\n  resources: [{apiVersion: batch/v1, kind: Job}]\n  ttl: 720h\n";
    let (applied, output) = kube_retention_e2e::outcome_with_input(
        cluster.kubectl().args(["apply", "-f", "-"]),
        policy,
    )?;
    ensure!(applied, "applying a RetentionPolicy: {output}");
    for warning in CANNOT_ACT {
        ensure!(
            !output.contains(warning),
            "the policy's apply warned: {output}"
        );
    }
    Ok(())
}
