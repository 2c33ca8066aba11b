//! The image `make image` built (its path in KUBE_RETENTION_IMAGE): the manifest and config as a
//! runtime reads them, and each binary of the layer static, the servers copying with our memcpy,
//! and running (`--version`) with an empty environment. `make image-test` runs it; plain
//! `cargo test` skips it, naming why.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use anyhow::{Context, ensure};
use kube_retention_image::{USER, inspect, is_dynamic};

/// The servers, which copy with kube-retention-memcpy's memcpy rather than musl's.
const WITH_OUR_MEMCPY: [&str; 2] = ["kube-retention-controller", "kube-retention-webhook"];

const BINARIES: [&str; 4] = [
    "kube-retention-certs",
    "kube-retention-controller",
    "kube-retention-webhook",
    "kubectl-retention",
];

#[test]
#[ignore = "needs the image `make image` builds: run by `make image-test`"]
fn the_built_image_holds_static_binaries_that_run() -> anyhow::Result<()> {
    let archive = std::env::var_os("KUBE_RETENTION_IMAGE")
        .context("set KUBE_RETENTION_IMAGE to the archive make image wrote")?;
    let inspected = inspect(archive.as_ref())?;
    ensure!(
        inspected.config["config"]["User"] == USER,
        "config: {}",
        inspected.config
    );
    ensure!(
        inspected.manifest["layers"].as_array().map(Vec::len) == Some(1),
        "manifest: {}",
        inspected.manifest
    );
    let names: Vec<&str> = inspected.files.keys().map(String::as_str).collect();
    ensure!(names == BINARIES, "the layer holds {names:?}");
    let folder = tempfile::tempdir()?;
    for (name, (mode, uid, bytes)) in &inspected.files {
        ensure!(
            *mode == 0o755 && *uid == 0,
            "{name}: mode {mode:o}, uid {uid}"
        );
        ensure!(
            !is_dynamic(bytes)?,
            "{name} needs a dynamic loader: build it for musl"
        );
        ensure!(
            kube_retention_memcpy::linked_in(bytes)? == WITH_OUR_MEMCPY.contains(&name.as_str()),
            "{name}: memcpy is not {} as expected",
            kube_retention_memcpy::SYMBOL
        );
        let path = folder.path().join(name);
        std::fs::write(&path, bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        let output = Command::new(&path).arg("--version").env_clear().output()?;
        let said = String::from_utf8_lossy(&output.stdout);
        ensure!(
            output.status.success() && said.starts_with(&format!("{name} ")),
            "{name} --version: {said}"
        );
        println!("{}", said.trim());
    }
    Ok(())
}
