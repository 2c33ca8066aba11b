//! Certificate rotation under load: the real HTTPS server on 127.0.0.1, its certificate files
//! replaced while clients keep sending requests over new and long-lived connections. The new
//! certificate must be served (checked by its SAN) and no request may fail.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kube_retention_certs::CertificateAuthority;
use kube_retention_webhook::connections::{Bounds, Connections};
use kube_retention_webhook::server::DEFAULT_MAX_STREAMS;
use kube_retention_webhook::tls::{CertificateFiles, server_config};
use kube_retention_webhook::{Context, router, server};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use x509_parser::prelude::*;

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

fn write_atomically(path: &Path, contents: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, contents).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

async fn install(dir: &Path, ca: &CertificateAuthority, name: &str, pause: Duration) {
    let certified = ca
        .issue_serving(&["127.0.0.1", name], ::time::Duration::hours(1))
        .unwrap();
    // Key first, then certificate: between the two writes the pair does not match, which the
    // server must ride out by keeping the old certificate.
    write_atomically(&dir.join("tls.key"), &certified.key_pem);
    tokio::time::sleep(pause).await;
    write_atomically(&dir.join("tls.crt"), &certified.cert_pem);
}

async fn connect(
    address: SocketAddr,
    connector: &TlsConnector,
) -> std::io::Result<TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(address).await?;
    connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
}

async fn handshake(stream: TlsStream<tokio::net::TcpStream>) -> Sender {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    sender
}

async fn healthz(sender: &mut Sender) -> bool {
    let request = hyper::Request::get("/healthz")
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .unwrap();
    match sender.send_request(request).await {
        Ok(response) if response.status() == 200 => response.into_body().collect().await.is_ok(),
        _ => false,
    }
}

/// The DNS names of the certificate the server presents on a new connection.
async fn served_names(address: SocketAddr, connector: &TlsConnector) -> Vec<String> {
    let stream = connect(address, connector).await.unwrap();
    let der = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    let names = cert.subject_alternative_name().unwrap().unwrap();
    names
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_is_served_without_failing_a_request() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::generate("rotation-test-ca", ::time::Duration::days(1)).unwrap();
    install(dir.path(), &ca, "first.example", Duration::ZERO).await;

    let (tls, _reloading) = server_config(
        CertificateFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        },
        Duration::from_millis(50),
        None,
    )
    .unwrap();
    let context = Arc::new(Context::new(
        Arc::new(support::FakeParents::with_fixtures()),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        tls,
        router::router(context.clone(), 1 << 20),
        Arc::new(Connections::new(Bounds::default(), context.metrics.clone())),
        DEFAULT_MAX_STREAMS,
        async {
            stopped.await.ok();
        },
    ));

    let mut roots = rustls::RootCertStore::empty();
    let ca_der = x509_parser::pem::parse_x509_pem(ca.certified().cert_pem.as_bytes())
        .unwrap()
        .1
        .contents;
    roots.add(ca_der.into()).unwrap();
    let mut client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Full handshakes only: a resumed session would report the certificate it started with.
    client.resumption = rustls::client::Resumption::disabled();
    let connector = TlsConnector::from(Arc::new(client));
    assert_eq!(served_names(address, &connector).await, ["first.example"]);

    let running = Arc::new(AtomicBool::new(true));
    let succeeded = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    // Two clients open a new connection per request (new handshakes throughout the rotation)
    // and one keeps a single connection open across it.
    for fresh_connections in [true, true, false] {
        let (running, succeeded, failed, connector) = (
            running.clone(),
            succeeded.clone(),
            failed.clone(),
            connector.clone(),
        );
        load.push(tokio::spawn(async move {
            let mut kept = None;
            let mut kept_served = 0;
            while running.load(Ordering::Relaxed) {
                let ok = if fresh_connections {
                    match connect(address, &connector).await {
                        Ok(stream) => healthz(&mut handshake(stream).await).await,
                        Err(_) => false,
                    }
                } else {
                    if kept.is_none() {
                        kept = Some(handshake(connect(address, &connector).await.unwrap()).await);
                    }
                    let ok = healthz(kept.as_mut().unwrap()).await;
                    kept_served += usize::from(ok);
                    ok
                };
                let counter = if ok { &succeeded } else { &failed };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            kept_served
        }));
    }

    tokio::time::sleep(Duration::from_millis(300)).await;
    // Long enough for the server to see the mismatched pair at least once.
    install(
        dir.path(),
        &ca,
        "second.example",
        Duration::from_millis(150),
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while served_names(address, &connector).await != ["second.example"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.store(false, Ordering::Relaxed);
    let mut kept_served = 0;
    for task in load {
        kept_served += task.await.unwrap();
    }
    stop_server.send(()).unwrap();
    server.await.unwrap().unwrap();

    let (succeeded, failed) = (
        succeeded.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed",
        succeeded + failed
    );
    assert!(succeeded > 100, "only {succeeded} requests ran");
    assert!(
        kept_served > 50,
        "the long-lived connection served {kept_served} requests"
    );
}
