//! `kube-retention-release`: writes a release's `dist/` from binaries already built. `make
//! release VERSION=x.y.z` builds the static binaries for linux/amd64 and linux/arm64, packages
//! the chart with Helm, then calls this for the rest:
//!
//! - `kube-retention-<version>.oci.tar`: the image index of both platforms (`image/`);
//! - `kubectl-retention-<version>-linux-<arch>.tar.gz` and `kubectl-retention.yaml`, the krew
//!   manifest (`plugin`);
//! - `kube-retention-<version>.cdx.json`, the SBOM (`sbom`);
//! - `SHA256SUMS` of every file in `dist/`, the chart included, in `sha256sum -c`'s format.
//!
//! It refuses a version other than the workspace's: the binaries say that version, and a
//! release whose parts disagree is not one (docs/releasing.md says what to bump).

mod plugin;
mod sbom;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, ensure};
use clap::Parser;
use kube_retention_image::{Arch, Binaries, Image};

/// The workspace's version: every crate's, the binaries' `--version`.
const WORKSPACE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The image's binaries, by file name.
const IMAGE_BINARIES: [&str; 4] = [
    "kube-retention-controller",
    "kube-retention-webhook",
    "kube-retention-certs",
    plugin::BINARY,
];

#[derive(Parser)]
#[command(
    name = "kube-retention-release",
    version,
    about = "Writes a kube-retention release's dist/"
)]
struct Args {
    /// The version released: the workspace's.
    #[arg(long = "release-version", value_name = "VERSION")]
    release_version: String,
    /// The commit released (`org.opencontainers.image.revision`).
    #[arg(long)]
    revision: Option<String>,
    /// The release folder; the chart is already packaged into it.
    #[arg(long, default_value = "dist")]
    dist: PathBuf,
    /// The folder of the linux/amd64 static binaries.
    #[arg(long)]
    amd64: PathBuf,
    /// The folder of the linux/arm64 static binaries.
    #[arg(long)]
    arm64: PathBuf,
}

impl Args {
    fn run(self) -> Result<()> {
        let version = &self.release_version;
        ensure!(
            version == WORKSPACE_VERSION,
            "VERSION {version} is not the workspace's version {WORKSPACE_VERSION}: bump \
             [workspace.package] version in Cargo.toml and the chart's version first \
             (docs/releasing.md)"
        );
        let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        check_chart_version(&workspace, version)?;
        let folders = [(Arch::Amd64, &self.amd64), (Arch::ARM64, &self.arm64)];
        let image = Image {
            revision: self.revision.clone(),
            ..Image::kube_retention(
                folders
                    .iter()
                    .map(|(architecture, folder)| Binaries {
                        architecture: architecture.clone(),
                        paths: IMAGE_BINARIES
                            .iter()
                            .map(|name| folder.join(name))
                            .collect(),
                    })
                    .collect(),
                version.clone(),
            )
        };
        let digest = kube_retention_image::build(
            &image,
            &self.dist.join(format!("kube-retention-{version}.oci.tar")),
        )?;
        println!("image index {digest}");
        let mut archives = Vec::new();
        for (architecture, folder) in folders {
            let architecture = architecture.to_string();
            let name = plugin::archive_name(version, &architecture);
            let path = self.dist.join(&name);
            plugin::write_archive(
                &folder.join(plugin::BINARY),
                &workspace.join("LICENSE"),
                &path,
            )?;
            archives.push((architecture, name, hex_sha256(&path)?));
        }
        std::fs::write(
            self.dist.join("kubectl-retention.yaml"),
            plugin::krew_manifest(version, &archives)?,
        )?;
        sbom::write(
            &workspace,
            &["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"],
            version,
            &self.dist.join(format!("kube-retention-{version}.cdx.json")),
        )?;
        write_checksums(&self.dist)
    }
}

/// Fails unless the chart's version and appVersion are `version`: `helm package` could override
/// both, but then the chart in the repository would say another release than the one cut.
fn check_chart_version(workspace: &Path, version: &str) -> Result<()> {
    let path = workspace.join("charts/kube-retention/Chart.yaml");
    let chart: serde_json::Value = serde_norway::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    ensure!(
        chart["version"] == version && chart["appVersion"] == version,
        "{} says version {} and appVersion {}, not {version}: bump both (docs/releasing.md)",
        path.display(),
        chart["version"],
        chart["appVersion"]
    );
    Ok(())
}

/// The hex SHA-256 of the file at `path`.
fn hex_sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(kube_retention_image::sha256_hex(&bytes))
}

/// `SHA256SUMS` of every other file in `dist`, sorted by name, as `sha256sum` writes it.
fn write_checksums(dist: &Path) -> Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dist)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    names.retain(|name| name != "SHA256SUMS");
    names.sort();
    let mut sums = String::new();
    for name in names {
        sums.push_str(&format!("{}  {name}\n", hex_sha256(&dist.join(&name))?));
    }
    std::fs::write(dist.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn main() -> ExitCode {
    match Args::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
