//! The image `make image` or `make release` built (its path in KUBE_RETENTION_IMAGE): the
//! manifest and config of each platform as a runtime reads them, and each binary of each layer
//! static, the amd64 servers copying with our memcpy, and running (`--version`) with an empty
//! environment — arm64's under qemu-user (`qemu-aarch64`, Debian's qemu-user). With
//! KUBE_RETENTION_PLATFORMS (`amd64,arm64`) the image must hold exactly those platforms.
//! `make image-test` and `make release-test` run it; plain `cargo test` skips it, naming why.

use std::os::unix::fs::PermissionsExt;

use anyhow::{Context, ensure};
use kube_retention_image::{PlatformImage, USER, command_for, inspect, is_dynamic};

/// The amd64 servers, which copy with kube-retention-memcpy's memcpy rather than musl's (the
/// crate is empty on other architectures).
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
    let expected = std::env::var("KUBE_RETENTION_PLATFORMS").unwrap_or_else(|_| "amd64".into());
    let platforms: Vec<&str> = inspected.images.keys().map(String::as_str).collect();
    ensure!(
        platforms == expected.split(',').collect::<Vec<_>>(),
        "the image has {platforms:?}, not {expected}"
    );
    for (architecture, image) in &inspected.images {
        check_platform(architecture, image).with_context(|| format!("the {architecture} image"))?;
    }
    Ok(())
}

fn check_platform(architecture: &str, image: &PlatformImage) -> anyhow::Result<()> {
    ensure!(
        image.config["config"]["User"] == USER,
        "config: {}",
        image.config
    );
    ensure!(
        image.manifest["layers"].as_array().map(Vec::len) == Some(1),
        "manifest: {}",
        image.manifest
    );
    let names: Vec<&str> = image.files.keys().map(String::as_str).collect();
    ensure!(names == BINARIES, "the layer holds {names:?}");
    let folder = tempfile::tempdir()?;
    for (name, (mode, uid, bytes)) in &image.files {
        ensure!(
            *mode == 0o755 && *uid == 0,
            "{name}: mode {mode:o}, uid {uid}"
        );
        ensure!(
            !is_dynamic(bytes)?,
            "{name} needs a dynamic loader: build it for musl"
        );
        let ours = architecture == "amd64" && WITH_OUR_MEMCPY.contains(&name.as_str());
        ensure!(
            kube_retention_memcpy::linked_in(bytes)? == ours,
            "{name}: memcpy is {}{} as expected",
            if ours { "not " } else { "" },
            kube_retention_memcpy::SYMBOL
        );
        let path = folder.path().join(name);
        std::fs::write(&path, bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        let mut command = command_for(architecture, &path)?;
        let output = command
            .arg("--version")
            .env_clear()
            .output()
            .with_context(|| format!("running {name} (qemu-user for arm64)"))?;
        let said = String::from_utf8_lossy(&output.stdout);
        ensure!(
            output.status.success()
                && said.trim() == format!("{name} {}", env!("CARGO_PKG_VERSION")),
            "{name} --version: {said}"
        );
        println!("{architecture}: {}", said.trim());
    }
    Ok(())
}
