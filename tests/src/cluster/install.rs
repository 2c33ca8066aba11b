//! What a new local cluster gets before tests use it: Shipwright's and the test-only
//! OpenShift-style CRDs, `deploy/local` pointed at the local webhook, and a kubeconfig for each
//! kube-retention ServiceAccount.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{CONTROLLER_SERVICE_ACCOUNT, LocalCluster, NAMESPACE, WEBHOOK_SERVICE_ACCOUNT};
use crate::kubeconfig::{self, Credentials};
use crate::run;

impl LocalCluster {
    /// Installs Shipwright's CRDs, the test-only OpenShift-style build CRDs, and `deploy/local`
    /// with its webhook configurations pointed at the local webhook; then writes a kubeconfig
    /// for each kube-retention ServiceAccount.
    pub(super) fn install(&self) -> Result<()> {
        self.install_crds()?;
        self.apply_local_overlay()?;
        for service_account in [CONTROLLER_SERVICE_ACCOUNT, WEBHOOK_SERVICE_ACCOUNT] {
            self.write_service_account_kubeconfig(service_account)?;
        }
        Ok(())
    }

    /// Installs Shipwright's CRDs and the test-only OpenShift-style build CRDs and waits until
    /// they are served.
    pub(super) fn install_crds(&self) -> Result<()> {
        let crds = [
            self.layout.shipwright_crds(),
            self.layout.repo_root.join("tests/crds"),
        ];
        for dir in &crds {
            // Server-side apply: Shipwright's CRDs are too large for client-side apply's annotation.
            run(self
                .kubectl()
                .args([
                    "apply",
                    "--server-side",
                    "--field-manager=kube-retention-dev",
                    "-f",
                ])
                .arg(dir))
            .with_context(|| format!("installing the CRDs in {}", dir.display()))?;
        }
        // `kubectl wait` fails outright until the CRDs have a status at all; retry until then.
        crate::retry(Duration::from_secs(60), || {
            run(self.kubectl().args([
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/builds.shipwright.io",
                "crd/buildruns.shipwright.io",
                "crd/builds.build.openshift.io",
                "crd/buildconfigs.build.openshift.io",
            ]))
        })
        .map(drop)
    }

    /// Applies `deploy/local` with every webhook configuration pointed at the local webhook and
    /// its CA; applying it again restores them after a test changed them.
    pub fn apply_local_overlay(&self) -> Result<()> {
        let yaml = run(self
            .kubectl()
            .args(["kustomize"])
            .arg(self.layout.repo_root.join("deploy/local")))?;
        let json = crate::run_with_input(
            self.kubectl()
                .args(["create", "--dry-run=client", "--output=json", "-f", "-"]),
            &yaml,
        )?;
        // One JSON document per object: gather them into a List.
        let items = serde_json::Deserializer::from_str(&json)
            .into_iter::<serde_json::Value>()
            .collect::<Result<Vec<_>, _>>()?;
        let mut manifests = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let ca_bundle = fs::read_to_string(self.layout.state("pki/webhook-ca.crt"))?;
        let url_base = format!("https://127.0.0.1:{}", self.webhook_port);
        let pointed =
            kube_retention_certs::point_webhooks(&mut manifests, &ca_bundle, Some(&url_base));
        anyhow::ensure!(pointed > 0, "deploy/local registers no webhooks");
        crate::run_with_input(
            self.kubectl().args(["apply", "-f", "-"]),
            &manifests.to_string(),
        )?;
        Ok(())
    }

    /// A kubeconfig that acts as a kube-retention ServiceAccount, with the RBAC `deploy/` grants.
    pub fn service_account_kubeconfig(&self, service_account: &str) -> PathBuf {
        self.layout.state(&format!("{service_account}.kubeconfig"))
    }

    fn write_service_account_kubeconfig(&self, service_account: &str) -> Result<()> {
        let token = run(self.kubectl().args([
            "create",
            "token",
            service_account,
            "--namespace",
            NAMESPACE,
            "--duration=720h",
        ]))?;
        let ca_pem = fs::read_to_string(self.layout.state("pki/ca.crt"))?;
        kubeconfig::write(
            &self.service_account_kubeconfig(service_account),
            &self.server(),
            &ca_pem,
            Credentials::Token(token.trim()),
        )
    }
}
