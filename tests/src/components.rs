//! kube-retention's own processes on the local cluster: each runs as a local process with the
//! kubeconfig of its ServiceAccount (the RBAC `deploy/` grants, never admin).

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::cluster::{LocalCluster, WEBHOOK_SERVICE_ACCOUNT};
use crate::process::{self, Tracked};
use crate::retry;

pub const WEBHOOK: &str = "kube-retention-webhook";

/// Starts the webhook on the cluster's webhook port with the serving certificate under `pki/`.
pub fn start_webhook(cluster: &LocalCluster) -> Result<Tracked> {
    let layout = &cluster.layout;
    let binary = layout.cargo_binary(WEBHOOK);
    ensure!(
        binary.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        binary.display()
    );
    process::spawn(
        &layout.state_dir,
        WEBHOOK,
        Command::new(binary)
            .arg(format!("--listen=127.0.0.1:{}", cluster.webhook_port))
            .arg(format!(
                "--tls-cert={}",
                layout.state("pki/webhook.crt").display()
            ))
            .arg(format!(
                "--tls-key={}",
                layout.state("pki/webhook.key").display()
            ))
            .arg(format!(
                "--kubeconfig={}",
                cluster
                    .service_account_kubeconfig(WEBHOOK_SERVICE_ACCOUNT)
                    .display()
            ))
            .arg("--log-format=text"),
    )
}

/// Waits until an admission round trip through the API server works: a server-side dry-run of
/// an annotated ConfigMap comes back stamped with `retention.dev/expires-at`.
pub fn wait_for_admission(cluster: &LocalCluster, timeout: Duration) -> Result<()> {
    let probe = r#"{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "admission-probe", "namespace": "default",
                     "annotations": {"retention.dev/ttl": "1m"}}}"#;
    retry(timeout, || {
        let output = crate::run_with_input(
            cluster
                .kubectl()
                .args(["create", "--dry-run=server", "--output=json", "-f", "-"]),
            probe,
        )?;
        let object: serde_json::Value = serde_json::from_str(&output)?;
        object
            .pointer("/metadata/annotations/retention.dev~1expires-at")
            .context("the webhook has not stamped the probe yet")?;
        Ok(())
    })
    .with_context(|| {
        format!(
            "no admission round trip within {timeout:?}: see {}",
            cluster
                .layout
                .state("logs/kube-retention-webhook.log")
                .display()
        )
    })
}
