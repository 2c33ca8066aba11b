//! Client authentication on the real HTTPS server (127.0.0.1, rustls): with a client CA, a
//! client presenting a certificate that CA signed is answered, and one presenting none, or one
//! of another CA, is refused during the TLS handshake, before any HTTP; no admission is counted.
//! Probes and metrics have a plain router of their own ([`router::probes`]), without the
//! admission routes.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kube_retention_certs::{CertificateAuthority, CertifiedKey};
use kube_retention_webhook::connections::{Bounds, Connections};
use kube_retention_webhook::server::DEFAULT_MAX_STREAMS;
use kube_retention_webhook::tls::{CertificateFiles, client_verifier, server_config};
use kube_retention_webhook::{Context, router, server};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::{TestRouter, fixture};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const VALIDITY: ::time::Duration = ::time::Duration::hours(1);

struct Served {
    address: SocketAddr,
    context: Arc<Context>,
    serving_ca: CertificateAuthority,
    _dir: tempfile::TempDir,
}

/// The webhook on a free port, verifying clients against `clients_ca`.
async fn serve(clients_ca: &CertificateAuthority) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let serving_ca = CertificateAuthority::generate("serving-ca", VALIDITY).unwrap();
    let serving = serving_ca.issue_serving(&["127.0.0.1"], VALIDITY).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &serving.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &serving.key_pem).unwrap();
    let ca_file = dir.path().join("clients.crt");
    std::fs::write(&ca_file, &clients_ca.certified().cert_pem).unwrap();
    let (tls, _reloading) = server_config(
        CertificateFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        },
        Duration::from_secs(3600),
        Some(client_verifier(&ca_file).unwrap()),
    )
    .unwrap();
    let context = Arc::new(Context::new(
        Arc::new(support::FakeParents::with_fixtures()),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let routes = router::router(context.clone(), router::DEFAULT_MAX_BODY_BYTES);
    let connections = Arc::new(Connections::new(Bounds::default(), context.metrics.clone()));
    tokio::spawn(server::serve(
        listener,
        tls,
        routes,
        connections,
        DEFAULT_MAX_STREAMS,
        std::future::pending(),
    ));
    Served {
        address,
        context,
        serving_ca,
        _dir: dir,
    }
}

/// POSTs a review to `/validate` presenting `identity` (none: no certificate): the status, or
/// the error that ended the connection.
async fn post(served: &Served, identity: Option<&CertifiedKey>) -> Result<StatusCode, String> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(served.serving_ca.certified().cert_pem.as_bytes());
    roots.add(ca.unwrap()).unwrap();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match identity {
        Some(identity) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(identity.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(served.address)
        .await
        .unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut stream = connector
        .connect(name, tcp)
        .await
        .map_err(|error| format!("handshake: {error}"))?;
    // Plain HTTP/1.1 over the TLS stream: whatever ends the exchange (an alert) is read here.
    let review = serde_json::to_string(&fixture("validate-build-two-errors.json")).unwrap();
    let request = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{review}",
        review.len()
    );
    let exchange = async {
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = exchange.await.map_err(|error| format!("{error:?}"))?;
    let response = String::from_utf8_lossy(&response);
    let status = response
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP response: {response}"))?;
    Ok(StatusCode::from_u16(status).unwrap())
}

fn admissions_counted(context: &Context) -> bool {
    context
        .metrics
        .encode()
        .contains("kube_retention_webhook_admission_requests_total{")
}

#[tokio::test]
async fn only_a_client_with_a_certificate_of_the_named_ca_is_answered() {
    let clients_ca = CertificateAuthority::generate("api-server-clients", VALIDITY).unwrap();
    let served = serve(&clients_ca).await;

    let refused = post(&served, None).await.unwrap_err();
    // TLS 1.3: the client's side of the handshake ends before the server has read its
    // certificate, so the server's alert arrives in place of the first answer.
    assert!(
        refused.contains("AlertReceived(CertificateRequired)"),
        "refused in TLS, not HTTP: {refused}"
    );
    let stranger_ca = CertificateAuthority::generate("someone-else", VALIDITY).unwrap();
    let stranger = stranger_ca
        .issue_client("kube-apiserver", &[], VALIDITY)
        .unwrap();
    let refused = post(&served, Some(&stranger)).await.unwrap_err();
    assert!(
        refused.contains("AlertReceived(UnknownCA)"),
        "refused in TLS, not HTTP: {refused}"
    );
    assert!(!admissions_counted(&served.context), "nothing was answered");

    let api_server = clients_ca
        .issue_client("kube-retention-webhook.kube-retention.svc", &[], VALIDITY)
        .unwrap();
    assert_eq!(post(&served, Some(&api_server)).await, Ok(StatusCode::OK));
    assert!(admissions_counted(&served.context));
}

#[tokio::test]
async fn the_probes_router_serves_probes_and_metrics_and_no_admission() {
    let context = Arc::new(Context::new(
        Arc::new(support::FakeParents::with_fixtures()),
    ));
    let probes = TestRouter::over(router::probes(context));
    for (path, expected) in [
        ("/healthz", StatusCode::OK),
        ("/readyz", StatusCode::OK),
        ("/metrics", StatusCode::OK),
    ] {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let (status, _) = probes.clone().oneshot_raw(request).await;
        assert_eq!(status, expected, "{path}");
    }
    for path in ["/validate", "/mutate"] {
        let request = Request::post(path).body(Body::from("{}")).unwrap();
        let (status, _) = probes.clone().oneshot_raw(request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
}

#[test]
fn a_client_ca_file_that_cannot_serve_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "").unwrap();
    let missing = dir.path().join("missing.crt");
    for (path, reason) in [
        (&empty, "it holds no certificate"),
        (&missing, "reading it: No such file or directory"),
    ] {
        let error = client_verifier(path).expect_err("refused").to_string();
        assert!(
            error.starts_with(&format!(
                "TLS: the client CA file {}: {reason}",
                path.display()
            )),
            "{error}"
        );
    }
}
