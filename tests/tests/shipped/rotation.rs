//! Certificate rotation in the running webhook. The chart is upgraded to short lifetimes (the CA
//! 100 s, the serving certificate 40 s, renewed with 25 s left, checked every 2 s) and the
//! Secret deleted, so the sidecars start over with them (lifetimes apply from the next renewal).
//! Then, for 90 s with no pod restarting, the certificates the webhook pods serve change at
//! least three times and the caBundle (a CA rotation) at least once, every served certificate
//! verifies against the caBundle of that moment, and a trickle of admission requests sees no
//! error.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;
use kube_retention_e2e::cluster::SHIPPED_NAMESPACE;
use libtest_mimic::Trial;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use crate::settled::webhook_pods;
use crate::support::{Env, TestNamespace};
use crate::trickle::Trickle;
use crate::workloads::eventually;

/// The lifetimes the upgrade sets.
const SHORT: [&str; 2] = [
    "--set",
    "certificates.sidecar.checkEvery=2s,certificates.sidecar.caValidity=100s,\
     certificates.sidecar.validity=40s,certificates.sidecar.renewBefore=25s",
];
const WATCH: Duration = Duration::from_secs(90);
const SECRET: &str = "kube-retention-webhook-tls";
/// The webhook Service's name in the release's namespace: what its certificate is for.
const WEBHOOK_SERVICE: &str = "kube-retention-webhook";

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "the_webhook_serves_rotated_certificates_without_a_restart_and_admission_never_fails",
        rotation,
    )]
}

async fn rotation(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let chart = cluster.layout.repo_root.join("charts/kube-retention");
    let image = crate::shipped_image()?;
    cluster.helm_install(&chart, &image, &SHORT)?;
    let before = webhook_pods(&ns).await?;
    let secrets: Api<Secret> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    secrets.delete(SECRET, &DeleteParams::default()).await?;
    eventually(
        Duration::from_secs(60),
        "both webhook pods serve a short-lived certificate",
        || async {
            let bundle = ca_bundle(&ns).await?;
            for (_, ip, _) in &before {
                let Ok(served) = served_certificate(ip, &bundle).await else {
                    return Ok(false);
                };
                let (_, parsed) = x509_parser::parse_x509_certificate(&served)?;
                let left =
                    parsed.validity().not_after.timestamp() - jiff::Timestamp::now().as_second();
                if left > 45 {
                    return Ok(false);
                }
            }
            Ok(true)
        },
    )
    .await?;

    let trickle = Trickle::start(&ns)?;

    let mut served: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut bundles: BTreeSet<String> = BTreeSet::new();
    let started = Instant::now();
    while started.elapsed() < WATCH {
        let bundle = ca_bundle(&ns).await?;
        bundles.insert(bundle.clone());
        for (_, ip, _) in &before {
            let certificate = served_certificate(ip, &bundle)
                .await
                .with_context(|| format!("the webhook at {ip} after {:?}", started.elapsed()))?;
            served.insert(certificate);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let tally = trickle.stop();
    let after = webhook_pods(&ns).await?;
    // The chart's defaults again, for the tests after this one.
    cluster.helm_install(&chart, &image, &[])?;

    ensure!(
        before == after,
        "webhook pods restarted: {before:?} then {after:?}"
    );
    // Two pods' certificates renewed every 15 s or so: at least three served in 90 s.
    ensure!(served.len() >= 3, "{} certificates served", served.len());
    ensure!(bundles.len() >= 2, "the caBundle never changed");
    ensure!(
        tally.failures.is_empty() && tally.answered > 0,
        "admission failed {}",
        tally.summary()
    );
    Ok(())
}

async fn ca_bundle(ns: &TestNamespace) -> Result<String> {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.env.client.clone());
    let configuration = configurations.get("kube-retention").await?;
    let bundle = configuration
        .webhooks
        .iter()
        .flatten()
        .find_map(|webhook| webhook.client_config.ca_bundle.clone())
        .context("a caBundle")?;
    Ok(String::from_utf8(bundle.0)?)
}

/// The leaf certificate the webhook at `ip` serves, verified against `bundle` for the Service's
/// name, as the API server verifies it.
async fn served_certificate(ip: &str, bundle: &str) -> Result<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(certificate?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = TcpStream::connect((ip, 8443)).await?;
    let tls = connector
        .connect(
            ServerName::try_from(format!("{WEBHOOK_SERVICE}.{SHIPPED_NAMESPACE}.svc"))?,
            stream,
        )
        .await?;
    let (_, connection) = tls.get_ref();
    let leaf = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .context("no certificate served")?;
    Ok(leaf.as_ref().to_vec())
}
