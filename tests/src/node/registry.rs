//! The node's OCI registry: Debian's distribution registry (`docker-registry`), run on the host's
//! end of the node's link over TLS with a certificate of the cluster's CA, storing under the
//! state folder. The release's image index is pushed to it with skopeo and its chart with
//! `helm push`; the node's containerd pulls from it (a `hosts.toml` trusting the CA), so the
//! as-shipped suite installs kube-retention as a cluster admin would from a registry they own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::HOST_IP;
use crate::{LocalCluster, process, run};

/// The registry's process name (its pid file and log).
pub const PROCESS: &str = "registry";
/// Where it listens, on the host's end of the node's link.
const PORT: u16 = 5000;
/// The repository the image is pushed to, and the OCI chart repository's path.
const IMAGE_REPOSITORY: &str = "kube-retention";
const CHART_REPOSITORY: &str = "charts";

/// `<host>:<port>` of the registry.
pub fn address() -> String {
    format!("{HOST_IP}:{PORT}")
}

/// The image's repository in the registry, as a pod spec names it.
pub fn image_repository() -> String {
    format!("{}/{IMAGE_REPOSITORY}", address())
}

/// The chart's OCI address, as `helm install` takes it.
pub fn chart_reference() -> String {
    format!("oci://{}/{CHART_REPOSITORY}/kube-retention", address())
}

/// The CA that signed the registry's certificate: what containerd, skopeo and Helm trust.
pub fn ca_file(state: &Path) -> PathBuf {
    state.join("pki/ca.crt")
}

/// Writes the registry's configuration and starts it; returns once it answers.
pub(super) fn start(state: &Path) -> Result<()> {
    let dir = state.join("node/registry");
    fs::create_dir_all(dir.join("storage"))?;
    let config = dir.join("config.yml");
    fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {}\n  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("storage").display(),
            address(),
            state.join("pki/registry.crt").display(),
            state.join("pki/registry.key").display(),
        ),
    )?;
    process::spawn(
        state,
        PROCESS,
        Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&config),
    )?;
    crate::retry(Duration::from_secs(30), || {
        std::net::TcpStream::connect(address())
            .map(drop)
            .context("the registry does not answer yet")
    })
}

/// The containerd `hosts.toml` folder: the registry over TLS, trusting the cluster's CA.
pub(super) fn write_runtime_hosts(state: &Path, hosts_dir: &Path) -> Result<()> {
    let dir = hosts_dir.join(address());
    fs::create_dir_all(&dir)?;
    fs::write(
        dir.join("hosts.toml"),
        format!(
            "server = \"https://{address}\"\n[host.\"https://{address}\"]\n  \
             capabilities = [\"pull\", \"resolve\"]\n  ca = \"{ca}\"\n",
            address = address(),
            ca = ca_file(state).display()
        ),
    )?;
    Ok(())
}

impl LocalCluster {
    /// Pushes every platform of the image archive `archive` as `kube-retention:<tag>` (skopeo
    /// copy --all) and the packaged chart `chart` (`helm push`).
    pub fn push_release(&self, archive: &Path, tag: &str, chart: &Path) -> Result<()> {
        let certs = self.layout.state("node/registry/certs");
        fs::create_dir_all(&certs)?;
        fs::copy(ca_file(&self.layout.state_dir), certs.join("ca.crt"))?;
        run(Command::new("skopeo")
            .args(["copy", "--all", "--quiet", "--dest-cert-dir"])
            .arg(&certs)
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("docker://{}:{tag}", image_repository())))
        .with_context(|| format!("pushing {} to the registry", archive.display()))?;
        run(self
            .helm()
            .arg("push")
            .arg(chart)
            .arg(format!("oci://{}/{CHART_REPOSITORY}", address())))
        .with_context(|| format!("pushing {} to the registry", chart.display()))
        .map(drop)
    }
}
