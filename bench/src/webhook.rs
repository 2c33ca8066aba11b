//! The webhook as `make bench-webhook` runs it: the release binary as its own process over TLS,
//! with a kubeconfig of its ServiceAccount on the benchmark's private cluster (the RBAC deploy/
//! grants), so the writer check asks a real API server.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hyper::body::Bytes;
use kube_retention_certs::CertificateAuthority;
use serde_json::{Value, json};

use crate::load::{self, Target};

/// Where the requests of the benchmark claim to come from.
pub const NAMESPACE: &str = "bench";

/// A running webhook; stopped when dropped.
pub struct Webhook {
    child: Child,
    pub port: u16,
}

impl Webhook {
    /// Starts `binary` with the certificate files in `tls` and `kubeconfig`, plus `extra` flags.
    pub fn start(binary: &Path, tls: &Path, kubeconfig: &Path, extra: &[&str]) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(binary)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--tls-cert={}", tls.join("tls.crt").display()))
            .arg(format!("--tls-key={}", tls.join("tls.key").display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .context("starting the webhook")?;
        Ok(Self { child, port })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Writes a serving certificate for 127.0.0.1 into `dir` (tls.crt, tls.key).
pub fn certificates(dir: &Path) -> Result<CertificateAuthority> {
    let ca = CertificateAuthority::generate("bench-ca", time::Duration::days(1))?;
    let serving = ca.issue_serving(&["127.0.0.1"], time::Duration::days(1))?;
    std::fs::write(dir.join("tls.crt"), &serving.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &serving.key_pem)?;
    Ok(ca)
}

/// A load target for the webhook on `port`, trusting `ca`, sending `requests` round-robin.
pub fn target(
    ca: &CertificateAuthority,
    port: u16,
    requests: Vec<(&'static str, Bytes)>,
) -> Result<Arc<Target>> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = x509_parser::pem::parse_x509_pem(ca.certified().cert_pem.as_bytes())
        .map_err(|error| anyhow::anyhow!("CA PEM: {error}"))?
        .1
        .contents;
    roots.add(ca_der.into())?;
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(Target {
        address: format!("127.0.0.1:{port}").parse()?,
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
        requests,
    }))
}

/// Waits until `target` answers without errors, for up to 20 s.
pub async fn wait_until_serving(target: &Arc<Target>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while load::fixed_rate(target.clone(), 10, Duration::from_secs(1), 1)
        .await
        .errors
        > 0
    {
        if Instant::now() > deadline {
            bail!("the webhook did not answer within 20s");
        }
    }
    Ok(())
}

/// An AdmissionReview of `object` by `user` in [`NAMESPACE`].
pub fn review(operation: &str, group: &str, kind: &str, object: Value, user: &str) -> Bytes {
    review_with_old(operation, group, kind, object, None, user)
}

/// An AdmissionReview of `object` (replacing `old`, for an UPDATE) by `user` in [`NAMESPACE`].
pub fn review_with_old(
    operation: &str,
    group: &str,
    kind: &str,
    object: Value,
    old: Option<&Value>,
    user: &str,
) -> Bytes {
    let version = match group {
        "" | "batch" => "v1",
        _ => "v1beta1",
    };
    let mut request = json!({
        "uid": "3c9d2f8e-0000-4000-8000-000000000000",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "name": object["metadata"]["name"], "namespace": NAMESPACE, "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": object, "dryRun": false});
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    Bytes::from(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
            .to_string(),
    )
}

/// A ConfigMap given a TTL, validated: the write the writer check asks about.
pub fn annotated_config_map(user: &str) -> Bytes {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": NAMESPACE, "annotations": {"retention.dev/ttl": "10m"}},
        "data": {"k": "v"}});
    review("CREATE", "", "ConfigMap", config_map, user)
}

/// `binary`, if it was built.
pub fn existing(binary: &Path) -> Result<PathBuf> {
    if !binary.is_file() {
        bail!(
            "{} is missing: `make bench-webhook` builds it",
            binary.display()
        );
    }
    Ok(binary.to_path_buf())
}
