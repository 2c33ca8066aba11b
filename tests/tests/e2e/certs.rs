//! `kube-retention-certs ensure`, as the webhook's ServiceAccount with deploy/'s RBAC: it creates
//! the certificate Secret, writes the caBundle into the webhook configurations and the files
//! into --out-dir, and a second run changes nothing.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ResourceExt};
use kube_retention_e2e::cluster::{NAMESPACE, WEBHOOK_SERVICE_ACCOUNT};
use kube_retention_e2e::{components, run};
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

/// Changes the shared webhook configurations, so it runs with the disruptive trials.
pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "certs_ensure_keeps_secret_ca_bundle_and_files_current",
        ensure_certificates,
    )]
}

async fn ensure_certificates(ns: TestNamespace) -> Result<()> {
    let out_dir = tempfile::tempdir()?;
    let outcome = check(&ns, out_dir.path()).await;
    // Put the local webhook's own caBundle and URL back, whatever happened.
    let cluster = &ns.env.cluster;
    cluster.apply_local_overlay()?;
    components::wait_for_admission(cluster, Duration::from_secs(30))?;
    let secrets: Api<Secret> = Api::namespaced(ns.env.client.clone(), NAMESPACE);
    secrets
        .delete("kube-retention-webhook-tls", &DeleteParams::default())
        .await
        .ok();
    outcome
}

fn ensure_once(ns: &TestNamespace, out_dir: &std::path::Path) -> Result<String> {
    let cluster = &ns.env.cluster;
    run(
        std::process::Command::new(cluster.layout.cargo_binary("kube-retention-certs"))
            .arg("ensure")
            .arg("--kubeconfig")
            .arg(cluster.service_account_kubeconfig(WEBHOOK_SERVICE_ACCOUNT))
            .arg("--out-dir")
            .arg(out_dir),
    )
}

async fn check(ns: &TestNamespace, out_dir: &std::path::Path) -> Result<()> {
    ensure_once(ns, out_dir)?;
    let client = ns.env.client.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret = secrets.get("kube-retention-webhook-tls").await?;
    ensure!(secret.type_.as_deref() == Some("kubernetes.io/tls"));
    let data = secret.data.clone().context("secret data")?;
    let text = |key: &str| -> Result<String> {
        Ok(String::from_utf8(
            data.get(key)
                .with_context(|| format!("no {key}"))?
                .0
                .clone(),
        )?)
    };
    let ca = text("ca.crt")?;
    let served = std::fs::read_to_string(out_dir.join("tls.crt"))?;
    ensure!(
        served == text("tls.crt")?,
        "--out-dir holds the Secret's certificate"
    );
    ensure!(std::fs::read_to_string(out_dir.join("tls.key"))? == text("tls.key")?);
    let (_, pem) = x509_parser::pem::parse_x509_pem(served.as_bytes())?;
    let cert = pem.parse_x509()?;
    let san = cert.subject_alternative_name()?.context("no SAN")?;
    ensure!(
        format!("{:?}", san.value).contains("kube-retention-webhook.kube-retention.svc"),
        "{:?}",
        san.value
    );

    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating_before = mutating.get("kube-retention").await?;
    let validating_before = validating.get("kube-retention").await?;
    let bundles = mutating_before
        .webhooks
        .iter()
        .flatten()
        .map(|hook| hook.client_config.ca_bundle.clone())
        .chain(
            validating_before
                .webhooks
                .iter()
                .flatten()
                .map(|hook| hook.client_config.ca_bundle.clone()),
        );
    for bundle in bundles {
        let bundle = String::from_utf8(bundle.context("caBundle set")?.0)?;
        ensure!(bundle.trim() == ca.trim(), "caBundle is the Secret's CA");
    }

    ensure_once(ns, out_dir)?;
    ensure!(
        secrets
            .get("kube-retention-webhook-tls")
            .await?
            .resource_version()
            == secret.resource_version(),
        "a second run leaves the Secret alone"
    );
    ensure!(
        mutating.get("kube-retention").await?.resource_version()
            == mutating_before.resource_version()
    );
    ensure!(
        validating.get("kube-retention").await?.resource_version()
            == validating_before.resource_version()
    );
    Ok(())
}
