//! A local cluster with a node, running kube-retention as shipped: the control plane plus
//! kube-scheduler, the node ([`crate::node`]) with its registry, the release's image index and
//! packaged chart pushed there, and `helm install` of the chart from that OCI registry into
//! [`SHIPPED_NAMESPACE`] with its defaults — only the image's repository changed, the one the
//! README's quickstart changes. The node's containerd pulls the image. No kube-retention host
//! process runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{LocalCluster, NODE_CONTROL_PLANE, Outcome, PORTS_FILE};
use crate::layout::Layout;
use crate::node::{Node, registry};
use crate::{process, run};

/// The chart's release name, in [`SHIPPED_NAMESPACE`].
pub const CHART_RELEASE: &str = "kube-retention";
/// Where the chart is installed: not `kube-retention`, so that nothing works only there.
pub const SHIPPED_NAMESPACE: &str = "retention-system";
/// How long `helm install --wait` may take to bring every pod to Ready.
const HELM_WAIT: &str = "5m";

/// An image archive (`make release`'s or `make image`'s) and the reference the chart gives it.
#[derive(Debug, Clone)]
pub struct ShippedImage {
    pub archive: PathBuf,
    pub repository: String,
    /// The archive's own tag (its index's `org.opencontainers.image.ref.name`).
    pub tag: String,
    /// The digest the tag names: an image index's for several platforms, else the manifest's.
    /// A runtime that pulled the image reports it in each container's `imageID`.
    pub digest: String,
    /// `Never` for an image imported into the node's runtime, empty (the chart's default) for
    /// one pulled from the registry.
    pub pull_policy: &'static str,
}

impl ShippedImage {
    /// The archive at `archive` as pushed to the node's registry, which the node pulls from.
    pub fn in_registry(archive: &Path) -> Result<Self> {
        let (tag, digest) = archive_tag(archive)?;
        Ok(Self {
            archive: archive.to_path_buf(),
            repository: registry::image_repository(),
            tag,
            digest,
            pull_policy: "",
        })
    }

    /// The archive at `archive` imported into the node's runtime as
    /// `kube-retention.local/kube-retention:<its tag>`: a special build (fault injection) that
    /// is never pushed.
    pub fn imported(archive: &Path) -> Result<Self> {
        let (tag, digest) = archive_tag(archive)?;
        Ok(Self {
            archive: archive.to_path_buf(),
            repository: "kube-retention.local/kube-retention".into(),
            tag,
            digest,
            pull_policy: "Never",
        })
    }

    /// The chart values that point at it.
    pub fn chart_values(&self) -> Vec<String> {
        vec![
            format!("image.repository={}", self.repository),
            format!("image.tag={}", self.tag),
            format!("image.pullPolicy={}", self.pull_policy),
        ]
    }
}

/// The tag an image archive's index names, and the digest it names.
fn archive_tag(archive: &Path) -> Result<(String, String)> {
    let inspected = kube_retention_image::inspect(archive)
        .with_context(|| format!("reading {} (make release)", archive.display()))?;
    let tagged = &inspected.index["manifests"][0];
    let tag = tagged["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .context("the image's index names no tag")?;
    let digest = tagged["digest"]
        .as_str()
        .context("the tag names no digest")?;
    Ok((tag.to_owned(), digest.to_owned()))
}

impl LocalCluster {
    /// Starts a cluster with a node in `layout.state_dir` (unless one runs there), pushes
    /// `image` and the chart `chart` (packaged, or a folder to package) to the node's registry
    /// and installs the chart from there.
    pub fn up_with_node(
        layout: Layout,
        image: &ShippedImage,
        chart: &Path,
    ) -> Result<(Self, Outcome)> {
        layout.require(&crate::layout::NODE_BINARIES)?;
        if let Some(cluster) = Self::running_same_minor(&layout)? {
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
        let cluster = Self::down_if_failed(&layout.clone(), || {
            let cluster = Self::start(layout, true)?;
            cluster.start_scheduler()?;
            Node::up(&cluster)?;
            cluster.install_crds()?;
            let packaged = cluster.packaged_chart(chart)?;
            cluster.push_release(&image.archive, &image.tag, &packaged)?;
            let version = cluster.chart_version(&packaged)?;
            run(cluster
                .helm()
                .args([
                    "upgrade",
                    "--install",
                    CHART_RELEASE,
                    &registry::chart_reference(),
                ])
                .args(["--version", &version])
                .args(["--namespace", SHIPPED_NAMESPACE, "--create-namespace"])
                .args(["--wait", "--timeout", HELM_WAIT])
                .args(["--set", &format!("image.repository={}", image.repository)]))
            .context("helm install of the chart from the node's registry")?;
            cluster.write_ports()?;
            Ok(cluster)
        })?;
        Ok((cluster, Outcome::Started))
    }

    /// `chart` if it is a packaged chart, else the folder `chart` packaged into the state folder.
    fn packaged_chart(&self, chart: &Path) -> Result<PathBuf> {
        if chart.is_file() {
            return Ok(chart.to_path_buf());
        }
        let out = self.layout.state("node/registry/chart");
        if out.exists() {
            fs::remove_dir_all(&out)?;
        }
        let said = run(self
            .helm()
            .arg("package")
            .arg(chart)
            .arg("--destination")
            .arg(&out))?;
        // "Successfully packaged chart and saved it to: <path>"
        let path = said
            .trim()
            .rsplit(": ")
            .next()
            .context("helm package named no archive")?;
        Ok(PathBuf::from(path))
    }

    /// The version in a packaged chart's Chart.yaml (`helm show chart`).
    fn chart_version(&self, packaged: &Path) -> Result<String> {
        let shown = run(self.helm().args(["show", "chart"]).arg(packaged))?;
        let chart: serde_json::Value = serde_norway::from_str(&shown)?;
        chart["version"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{} has no version", packaged.display()))
    }

    /// `helm upgrade --install` of the chart at `chart` with `image`, and `extra` arguments
    /// (`--set key=value`, `--set-string key=value`), waiting until every pod is Ready.
    pub fn helm_install(&self, chart: &Path, image: &ShippedImage, extra: &[&str]) -> Result<()> {
        run(self
            .helm()
            .args(["upgrade", "--install", CHART_RELEASE])
            .arg(chart)
            .args(["--namespace", SHIPPED_NAMESPACE, "--create-namespace"])
            .args(["--wait", "--timeout", HELM_WAIT])
            .args(["--set", &image.chart_values().join(",")])
            .args(extra))
        .with_context(|| format!("helm install of {}", chart.display()))
        .map(drop)
    }

    /// The Helm built from Go modules, with the admin kubeconfig, its caches in the state
    /// folder, and the cluster's CA as its only trusted root (the node's registry's).
    pub fn helm(&self) -> Command {
        let mut command = Command::new(self.layout.binary("helm"));
        command.arg("--kubeconfig").arg(self.layout.kubeconfig());
        command.env("SSL_CERT_FILE", registry::ca_file(&self.layout.state_dir));
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
