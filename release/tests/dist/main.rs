//! The release folder `make release` wrote (its path in KUBE_RETENTION_DIST), read as a user and
//! a packager would: `SHA256SUMS` checked by coreutils' `sha256sum -c` and covering every file;
//! the chart's version and appVersion the release's, its image tag defaulting to it; each plugin
//! archive holding the binary and the licence, the binary running (arm64's under qemu-user) and
//! saying the version, the krew manifest naming each archive with its SHA-256 and krew itself
//! (built from its Go module by tests/cluster/build.sh) installing the plugin from it; the SBOM valid
//! CycloneDX 1.5 (cyclonedx-bom's validation) listing every crate `cargo tree` says the shipped
//! binaries link on either platform, with Cargo.lock's checksum. The image index itself is
//! image/tests/built_image.rs's, which `make release-test` runs on the release's archive.
//! Plain `cargo test` skips this, naming why.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

mod sbom;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn dist() -> Result<PathBuf> {
    std::env::var_os("KUBE_RETENTION_DIST")
        .map(PathBuf::from)
        .context("set KUBE_RETENTION_DIST to the folder make release wrote")
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files of a `.tar.gz`: name → (mode, bytes).
fn unpack(archive: &Path) -> Result<BTreeMap<String, (u32, Vec<u8>)>> {
    let file = std::fs::File::open(archive).with_context(|| format!("{}", archive.display()))?;
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(flate2::read::GzDecoder::new(file)).entries()? {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        let mode = entry.header().mode()?;
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        files.insert(name, (mode, bytes));
    }
    Ok(files)
}

#[test]
#[ignore = "needs the folder `make release` writes: run by `make release-test`"]
fn every_file_is_in_sha256sums_and_matches() -> Result<()> {
    let dist = dist()?;
    let checked = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dist)
        .output()?;
    ensure!(
        checked.status.success(),
        "sha256sum -c: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let listed: BTreeSet<String> = std::fs::read_to_string(dist.join("SHA256SUMS"))?
        .lines()
        .filter_map(|line| line.split_once("  ").map(|(_, name)| name.to_owned()))
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(&dist)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    let expected: BTreeSet<String> = [
        format!("kube-retention-{VERSION}.oci.tar"),
        format!("kube-retention-{VERSION}.tgz"),
        format!("kube-retention-{VERSION}.cdx.json"),
        format!("kubectl-retention-{VERSION}-linux-amd64.tar.gz"),
        format!("kubectl-retention-{VERSION}-linux-arm64.tar.gz"),
        "kubectl-retention.yaml".to_owned(),
        "SHA256SUMS".to_owned(),
    ]
    .into();
    ensure!(present == expected, "dist/ holds {present:?}");
    let mut without_sums = present;
    without_sums.remove("SHA256SUMS");
    ensure!(listed == without_sums, "SHA256SUMS lists {listed:?}");
    Ok(())
}

#[test]
#[ignore = "needs the folder `make release` writes: run by `make release-test`"]
fn the_chart_is_the_release_and_deploys_its_image() -> Result<()> {
    let files = unpack(&dist()?.join(format!("kube-retention-{VERSION}.tgz")))?;
    let chart: serde_json::Value = serde_norway::from_slice(
        &files
            .get("kube-retention/Chart.yaml")
            .context("no Chart.yaml")?
            .1,
    )?;
    ensure!(
        chart["version"] == VERSION && chart["appVersion"] == VERSION,
        "Chart.yaml: {chart}"
    );
    let values: serde_json::Value = serde_norway::from_slice(
        &files
            .get("kube-retention/values.yaml")
            .context("no values.yaml")?
            .1,
    )?;
    ensure!(
        values["image"]["tag"] == "",
        "the image tag is not the appVersion by default: {}",
        values["image"]
    );
    ensure!(files.contains_key("kube-retention/values.schema.json"));
    Ok(())
}

#[test]
#[ignore = "needs the folder `make release` writes: run by `make release-test`"]
fn krew_installs_the_plugin_from_the_manifest_and_archive() -> Result<()> {
    let dist = dist()?;
    let krew = workspace().join("tests/cluster/bin/krew");
    ensure!(
        krew.exists(),
        "{} is missing: run tests/cluster/build.sh",
        krew.display()
    );
    let root = tempfile::tempdir()?;
    let installed = Command::new(&krew)
        .arg("install")
        .arg(format!(
            "--manifest={}",
            dist.join("kubectl-retention.yaml").display()
        ))
        .arg(format!(
            "--archive={}",
            dist.join(format!("kubectl-retention-{VERSION}-linux-amd64.tar.gz"))
                .display()
        ))
        .env("KREW_ROOT", root.path())
        .env("KREW_OS", "linux")
        .env("KREW_ARCH", "amd64")
        .output()?;
    ensure!(
        installed.status.success(),
        "krew install: {}{}",
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    let output = Command::new(root.path().join("bin/kubectl-retention"))
        .arg("--version")
        .output()
        .context("running the plugin krew installed")?;
    ensure!(
        String::from_utf8_lossy(&output.stdout).trim() == format!("kubectl-retention {VERSION}"),
        "the installed plugin said {}",
        String::from_utf8_lossy(&output.stdout)
    );
    Ok(())
}

#[test]
#[ignore = "needs the folder `make release` writes: run by `make release-test`"]
fn the_plugin_archives_run_and_krew_names_each_with_its_digest() -> Result<()> {
    let dist = dist()?;
    let manifest: serde_json::Value =
        serde_norway::from_slice(&std::fs::read(dist.join("kubectl-retention.yaml"))?)?;
    ensure!(
        manifest["kind"] == "Plugin"
            && manifest["metadata"]["name"] == "retention"
            && manifest["spec"]["version"] == format!("v{VERSION}"),
        "krew manifest: {manifest}"
    );
    let platforms = manifest["spec"]["platforms"]
        .as_array()
        .context("no platforms")?;
    ensure!(platforms.len() == 2, "platforms: {platforms:?}");
    let folder = tempfile::tempdir()?;
    for architecture in ["amd64", "arm64"] {
        let name = format!("kubectl-retention-{VERSION}-linux-{architecture}.tar.gz");
        let archive = dist.join(&name);
        let files = unpack(&archive)?;
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        ensure!(
            names == ["LICENSE", "kubectl-retention"],
            "{name} holds {names:?}"
        );
        let platform = platforms
            .iter()
            .find(|platform| platform["selector"]["matchLabels"]["arch"] == architecture)
            .with_context(|| format!("krew names no {architecture} archive"))?;
        let digest = kube_retention_image::sha256_hex(&std::fs::read(&archive)?);
        ensure!(
            platform["sha256"] == digest
                && platform["uri"]
                    .as_str()
                    .is_some_and(|uri| uri.ends_with(&format!("/v{VERSION}/{name}")))
                && platform["bin"] == "kubectl-retention",
            "krew's {architecture} entry: {platform}"
        );
        let (mode, bytes) = &files["kubectl-retention"];
        ensure!(*mode == 0o755, "{name}: mode {mode:o}");
        let binary = folder.path().join(architecture);
        std::fs::write(&binary, bytes)?;
        std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let mut command = kube_retention_image::command_for(architecture, &binary)?;
        let output = command.arg("--version").env_clear().output()?;
        let said = String::from_utf8_lossy(&output.stdout);
        ensure!(
            said.trim() == format!("kubectl-retention {VERSION}"),
            "{name}: --version said {said}"
        );
    }
    Ok(())
}
