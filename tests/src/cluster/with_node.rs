//! A local cluster with a node, running kube-retention as shipped: the control plane plus
//! kube-scheduler, the node ([`crate::node`]), the image from `make image` imported into the
//! node's runtime and `helm install` of `charts/kube-retention` with its defaults — only the
//! image's reference and pull policy changed. No kube-retention host process runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{LocalCluster, NAMESPACE, NODE_CONTROL_PLANE, Outcome, PORTS_FILE};
use crate::layout::Layout;
use crate::node::Node;
use crate::{process, run};

/// The chart's release name, in [`NAMESPACE`].
pub const CHART_RELEASE: &str = "kube-retention";
/// How long `helm install --wait` may take to bring every pod to Ready.
const HELM_WAIT: &str = "5m";

/// The image from `make image`, and the name it is imported under on the node.
#[derive(Debug, Clone)]
pub struct ShippedImage {
    pub archive: PathBuf,
    pub repository: String,
    /// The archive's own tag (its index's `org.opencontainers.image.ref.name`).
    pub tag: String,
}

impl ShippedImage {
    /// The archive at `archive`, imported as `kube-retention.local/kube-retention:<its tag>`.
    pub fn from_archive(archive: &Path) -> Result<Self> {
        let inspected = kube_retention_image::inspect(archive)
            .with_context(|| format!("reading {} (make image)", archive.display()))?;
        let tag =
            inspected.index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
                .as_str()
                .context("the image's index names no tag")?
                .to_owned();
        Ok(Self {
            archive: archive.to_path_buf(),
            repository: "kube-retention.local/kube-retention".into(),
            tag,
        })
    }

    /// The chart values that point at it: the only values the as-shipped install changes.
    pub fn chart_values(&self) -> Vec<String> {
        vec![
            format!("image.repository={}", self.repository),
            format!("image.tag={}", self.tag),
            // Imported, so never pulled: there is no registry.
            "image.pullPolicy=Never".into(),
        ]
    }
}

impl LocalCluster {
    /// Starts a cluster with a node in `layout.state_dir` (unless one runs there) and installs
    /// the chart from `chart` with `image`.
    pub fn up_with_node(
        layout: Layout,
        image: &ShippedImage,
        chart: &Path,
    ) -> Result<(Self, Outcome)> {
        if let Some(cluster) = Self::running(&layout) {
            if !cluster.node {
                bail!(
                    "a cluster without a node runs in {}: `make down` first",
                    layout.state_dir.display()
                );
            }
            return Ok((cluster, Outcome::AlreadyRunning));
        }
        Self::down(&layout)?;
        fs::remove_file(layout.state(PORTS_FILE)).ok();
        for stale in ["etcd", "node"] {
            let dir = layout.state(stale);
            if dir.exists() {
                fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing the last run's {}", dir.display()))?;
            }
        }
        let cluster = Self::start(layout, true)?;
        cluster.start_scheduler()?;
        Node::up(&cluster)?;
        cluster.install_crds()?;
        Node::import_image(&cluster, &image.archive, &image.repository)?;
        cluster.helm_install(chart, image, &[])?;
        cluster.write_ports()?;
        Ok((cluster, Outcome::Started))
    }

    /// `helm upgrade --install` of the chart at `chart` with `image`, and `extra` arguments
    /// (`--set key=value`, `--set-string key=value`), waiting until every pod is Ready.
    pub fn helm_install(&self, chart: &Path, image: &ShippedImage, extra: &[&str]) -> Result<()> {
        run(self
            .helm()
            .args(["upgrade", "--install", CHART_RELEASE])
            .arg(chart)
            .args(["--namespace", NAMESPACE, "--create-namespace"])
            .args(["--wait", "--timeout", HELM_WAIT])
            .args(["--set", &image.chart_values().join(",")])
            .args(extra))
        .with_context(|| format!("helm install of {}", chart.display()))
        .map(drop)
    }

    /// The Helm built from Go modules, with the admin kubeconfig and its caches in the state
    /// folder.
    pub fn helm(&self) -> Command {
        let mut command = Command::new(self.layout.binary("helm"));
        command.arg("--kubeconfig").arg(self.layout.kubeconfig());
        for variable in ["HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"] {
            command.env(variable, self.layout.state("helm"));
        }
        command
    }

    fn start_scheduler(&self) -> Result<()> {
        let kubeconfig = self.layout.state("kube-scheduler.kubeconfig");
        self.write_identity_kubeconfig(NODE_CONTROL_PLANE, &self.server(), &kubeconfig)?;
        process::spawn(
            &self.layout.state_dir,
            NODE_CONTROL_PLANE,
            Command::new(self.layout.binary(NODE_CONTROL_PLANE))
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!(
                    "--authentication-kubeconfig={}",
                    kubeconfig.display()
                ))
                .arg(format!(
                    "--authorization-kubeconfig={}",
                    kubeconfig.display()
                ))
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg("--secure-port=0"),
        )?;
        Ok(())
    }
}
