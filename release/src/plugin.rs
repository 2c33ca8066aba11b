//! The plugin's release archives and its krew manifest.
//!
//! Each archive (`kubectl-retention-<version>-linux-<arch>.tar.gz`) holds the static binary and
//! the licence at its root, every time stamp the epoch and every file owned by root, so the same
//! binaries give the same archive. The krew manifest names each archive's download address on
//! the release page and its SHA-256, as krew's index requires
//! (<https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/>).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

/// The binary the archives ship.
pub const BINARY: &str = "kubectl-retention";
/// Where a release's files are downloaded from: the forge's release page of the tag `v<version>`.
const DOWNLOADS: &str = "https://github.com/kube-retention/kube-retention/releases/download";

/// The archive's file name for `architecture` (`amd64`, `arm64`).
pub fn archive_name(version: &str, architecture: &str) -> String {
    format!("{BINARY}-{version}-linux-{architecture}.tar.gz")
}

/// Writes the archive of `binary` and `license` to `out`.
pub fn write_archive(binary: &Path, license: &Path, out: &Path) -> Result<()> {
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let gzip = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut archive = tar::Builder::new(gzip);
    for (path, name, mode) in [(binary, BINARY, 0o755), (license, "LICENSE", 0o644)] {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        kube_retention_image::append_reproducible(&mut archive, name, &bytes, mode)?;
    }
    archive.into_inner()?.finish()?.flush()?;
    Ok(())
}

/// The krew manifest of `version`, each archive given as (architecture, file name, sha256 hex).
pub fn krew_manifest(version: &str, archives: &[(String, String, String)]) -> Result<String> {
    let platforms: Vec<_> = archives
        .iter()
        .map(|(architecture, name, sha256)| {
            json!({
                "selector": {"matchLabels": {"os": "linux", "arch": architecture}},
                "uri": format!("{DOWNLOADS}/v{version}/{name}"),
                "sha256": sha256,
                "files": [
                    {"from": BINARY, "to": "."},
                    {"from": "LICENSE", "to": "."}
                ],
                "bin": BINARY
            })
        })
        .collect();
    let manifest = json!({
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "retention"},
        "spec": {
            "version": format!("v{version}"),
            "homepage": "https://github.com/kube-retention/kube-retention",
            "shortDescription": "Explain and control when finished objects are deleted",
            "description": "Asks kube-retention when each finished object (Jobs, Pods, Shipwright \
    BuildRuns, Tekton and Argo runs) will be deleted and why, previews what a retention policy \
    would delete before it is applied, and approves policies held by the blast-radius guard. \
    Needs kube-retention installed in the cluster.",
            "platforms": platforms
        }
    });
    Ok(serde_norway::to_string(&manifest)?)
}
