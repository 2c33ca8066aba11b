//! Client authentication against the real API server. The local API server presents a client
//! certificate to webhooks that ask for one (its AdmissionConfiguration's kubeconfig,
//! `kube_retention_e2e::admission_config`); a webhook replica started with `--client-ca-file`
//! naming that certificate's CA and registered for this test's namespace with `failurePolicy:
//! Fail` answers the API server's reviews (a ConfigMap is created, and the replica counts the
//! review), while a direct POST without a client certificate is refused in the TLS handshake and
//! one with the API server's certificate is answered.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use kube_retention_e2e::components::{self, VERIFYING_WEBHOOK};
use kube_retention_e2e::pki::{WEBHOOK_CLIENT, WEBHOOK_CLIENT_CA};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::TestNamespace;
use crate::workloads::eventually;

/// The review the replica counts for each ConfigMap the API server sends it.
const COUNTED: &str = r#"kube_retention_webhook_admission_requests_total{hook="validate",kind="ConfigMap",operation="CREATE",outcome="allowed"}"#;

pub async fn verified(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let [port, metrics_port] = free_ports()?;
    let client_ca = cluster.layout.state(&format!("pki/{WEBHOOK_CLIENT_CA}"));
    let replica = components::start_webhook_with(
        &cluster,
        VERIFYING_WEBHOOK,
        port,
        &[
            format!("--client-ca-file={}", client_ca.display()),
            format!("--metrics-address=127.0.0.1:{metrics_port}"),
        ],
    )?;
    let registration = format!("kube-retention-e2e-verifying-{}", ns.name);
    let outcome = check(&ns, &registration, port, metrics_port).await;
    kube_retention_e2e::run(cluster.kubectl().args([
        "delete",
        "validatingwebhookconfiguration",
        &registration,
        "--ignore-not-found",
    ]))?;
    replica.stop(Duration::from_secs(10))?;
    outcome
}

async fn check(ns: &TestNamespace, registration: &str, port: u16, metrics_port: u16) -> Result<()> {
    let cluster = &ns.env.cluster;
    eventually(
        Duration::from_secs(30),
        "the verifying replica is ready",
        || async {
            Ok(components::http_get(metrics_port, "/readyz")
                .is_ok_and(|said| said.starts_with("HTTP/1.1 200")))
        },
    )
    .await?;
    let serving_ca = std::fs::read_to_string(cluster.layout.state("pki/webhook-ca.crt"))?;
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": registration},
        "webhooks": [{
            "name": "verifying.validate.retention.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            // Fail: a review the replica cannot be asked fails the write.
            "failurePolicy": "Fail",
            "timeoutSeconds": 3,
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}/validate"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&serving_ca),
            },
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                       "operations": ["CREATE"], "scope": "Namespaced"}],
        }],
    });
    kube_retention_e2e::run_with_input(
        cluster.kubectl().args(["apply", "-f", "-"]),
        &configuration.to_string(),
    )?;
    // The API server's reviews are answered: each ConfigMap is created (a failed call would
    // fail it), and the replica counts it. The registration takes effect within moments.
    let mut created = 0;
    eventually(Duration::from_secs(30), "the API server's review reaches the replica", || {
        created += 1;
        let name = format!("verified-{created}");
        async move {
            let yaml = format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    \
                 retention.dev/ttl: 10m\n"
            );
            let (ok, said) = kube_retention_e2e::outcome_with_input(
                ns.kubectl().args(["create", "-f", "-"]),
                &yaml,
            )?;
            ensure!(ok, "creating {name} through the verifying replica: {said}");
            Ok(components::counter(metrics_port, COUNTED)? >= 1)
        }
    })
    .await?;

    let refused = post(cluster, port, None)
        .await
        .expect_err("a POST without a client certificate is refused");
    // TLS 1.3: the server's alert arrives in place of the first answer.
    ensure!(
        format!("{refused:#}").contains("CertificateRequired"),
        "refused in the TLS handshake, not answered: {refused:#}"
    );
    let answered = post(cluster, port, Some(WEBHOOK_CLIENT)).await?;
    ensure!(
        answered == 200,
        "with the API server's certificate: {answered}"
    );
    Ok(())
}

/// A direct POST of a review to the replica on `port`, presenting the certificate and key named
/// by `identity` under `pki/` (none: no certificate): the HTTP status.
async fn post(
    cluster: &kube_retention_e2e::LocalCluster,
    port: u16,
    identity: Option<[&str; 2]>,
) -> Result<u16> {
    let read = |name: &str| std::fs::read(cluster.layout.state(&format!("pki/{name}")));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(&read("webhook-ca.crt")?)?)?;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let config = match identity {
        Some([cert, key]) => builder.with_client_auth_cert(
            vec![CertificateDer::from_pem_slice(&read(cert)?)?],
            PrivateKeyDer::from_pem_slice(&read(key)?)?,
        )?,
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "c", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "kube-retention-admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}}})
    .to_string();
    // Plain HTTP/1.1 over the TLS stream: whatever ends the exchange (an alert) is read here.
    let request = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{review}",
        review.len()
    );
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tls.read_to_end(&mut response).await?;
    let response = String::from_utf8_lossy(&response);
    let status = response
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .with_context(|| format!("not an HTTP response: {response}"))?;
    Ok(status.parse()?)
}

fn free_ports() -> Result<[u16; 2]> {
    let listeners = [
        std::net::TcpListener::bind("127.0.0.1:0")?,
        std::net::TcpListener::bind("127.0.0.1:0")?,
    ];
    let port = |index: usize| -> Result<u16> { Ok(listeners[index].local_addr()?.port()) };
    Ok([port(0)?, port(1)?])
}
