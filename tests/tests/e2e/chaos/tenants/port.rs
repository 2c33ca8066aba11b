//! Attacks on the webhook's port from a pod (issue 57's second to fourth reproductions): idle
//! HTTP/2 connections by the thousand, and slow bodies that send their headers and then a byte
//! a second, each from an address of its own on the loopback network, as a pod's would be —
//! while the API server's own reviews keep coming (a bad policy written every two seconds must
//! be refused by the webhook itself, never left to the registration's `failurePolicy`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::Api;
use kube::api::PostParams;
use kube_retention_common::api::RetentionPolicy;
use rustls::pki_types::ServerName;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;
use tokio_rustls::TlsConnector;

use crate::support::TestNamespace;

/// What the connections came to.
#[derive(Debug, Default)]
pub struct Connections {
    /// Opened: TLS and the HTTP/2 handshake done.
    pub opened: AtomicUsize,
    /// Refused before or during the handshakes.
    pub refused: AtomicUsize,
    /// Closed by the webhook afterwards (idle, or for room).
    pub closed: AtomicUsize,
}

/// A TCP connection to the webhook from `from`.
async fn connect(from: IpAddr, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
}

/// Opens `count` HTTP/2 connections from `from`, 64 handshakes at a time, and holds each idle
/// (no request ever sent) until the webhook closes it, or the task is aborted.
pub async fn idle_http2(
    connector: TlsConnector,
    from: IpAddr,
    port: u16,
    count: usize,
    connections: Arc<Connections>,
) {
    let handshakes = Arc::new(tokio::sync::Semaphore::new(64));
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..count {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return;
        };
        let (connector, connections) = (connector.clone(), connections.clone());
        held.spawn(async move {
            let opened = async {
                let tcp = connect(from, port).await?;
                let name = ServerName::try_from("127.0.0.1")?;
                let tls = connector.connect(name, tcp).await?;
                let (sender, connection) =
                    hyper::client::conn::http2::handshake::<
                        _,
                        _,
                        http_body_util::Empty<hyper::body::Bytes>,
                    >(TokioExecutor::new(), TokioIo::new(tls))
                    .await?;
                anyhow::Ok((sender, connection))
            }
            .await;
            drop(permit);
            match opened {
                Ok((sender, connection)) => {
                    connections.opened.fetch_add(1, Ordering::Relaxed);
                    connection.await.ok();
                    drop(sender);
                    connections.closed.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    connections.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while held.join_next().await.is_some() {}
}

/// Holds `count` requests to `/validate` from `from`, each sending its headers (a body of a
/// mebibyte announced) and then a byte a second, until the webhook cuts it off; then another
/// in its place, until aborted.
pub async fn slow_bodies(
    connector: TlsConnector,
    from: IpAddr,
    port: u16,
    count: usize,
    cut: Arc<AtomicUsize>,
) {
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let (connector, cut) = (connector.clone(), cut.clone());
            tokio::spawn(async move {
                loop {
                    hold_a_slow_body(&connector, from, port).await.ok();
                    cut.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.ok();
    }
}

/// One slow body: its headers, then a byte a second until the webhook cuts it off.
async fn hold_a_slow_body(connector: &TlsConnector, from: IpAddr, port: u16) -> Result<()> {
    let tcp = connect(from, port).await?;
    let mut tls = connector
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let head = "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{";
    tls.write_all(head.as_bytes()).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        tls.write_all(b" ").await?;
    }
}

/// What the bad policies' writes came to.
#[derive(Debug, Default)]
pub struct Refusals {
    /// Refused by the webhook itself, naming the field.
    pub by_the_webhook: AtomicUsize,
    /// Anything else: admitted, or refused without the webhook's answer.
    pub otherwise: AtomicUsize,
    pub first_otherwise: std::sync::Mutex<Option<String>>,
}

/// Writes a policy only the webhook can refuse (a `match` that is not CEL) every two seconds,
/// until aborted.
pub async fn bad_policies(attacker: TestNamespace, refusals: Arc<Refusals>) {
    let policies: Api<RetentionPolicy> =
        Api::namespaced(attacker.env.client.clone(), &attacker.name);
    for index in 0usize.. {
        let policy = serde_json::from_value::<RetentionPolicy>(json!({
            "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": format!("bad-{index}")},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttl": "1h", "match": "object.metadata.name +"}}));
        let answer = match policy {
            Ok(policy) => policies.create(&PostParams::default(), &policy).await,
            Err(_) => continue,
        };
        match answer {
            Err(kube::Error::Api(status))
                if status.message.contains("spec.match")
                    && status.message.contains("is not valid CEL") =>
            {
                refusals.by_the_webhook.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                refusals.otherwise.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = refusals.first_otherwise.lock() {
                    first.get_or_insert_with(|| format!("{other:?}"));
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
