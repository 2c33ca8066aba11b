//! Admission load over TLS the way kube-apiserver sends it through a Service: keep-alive
//! HTTP/1.1 connections to whichever webhook replica is ready (a poller plays the endpoints
//! controller, checking `/readyz` every 100 ms), a new connection when a response says
//! `Connection: close`. Every request that does not come back 200 is a failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

pub struct Replica {
    pub port: u16,
    pub ready: AtomicBool,
    pub answered: AtomicU64,
}

impl Replica {
    pub fn new(port: u16) -> Self {
        Self {
            port,
            ready: AtomicBool::new(false),
            answered: AtomicU64::new(0),
        }
    }
}

/// A client trusting the webhook's CA certificate (PEM).
pub fn connector(ca_pem: &str) -> Result<TlsConnector> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes())?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem.contents.into())?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

async fn connect<B>(connector: &TlsConnector, port: u16) -> Result<SendRequest<B>>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let tls = connector
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Polls each replica's `/readyz` until `stop`; a replica that fails or refuses is not ready.
pub async fn poll_readiness(
    replicas: Arc<Vec<Replica>>,
    connector: TlsConnector,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        for replica in replicas.iter() {
            let ready = async {
                let mut sender = connect::<Empty<Bytes>>(&connector, replica.port).await?;
                let request = hyper::Request::get("/readyz")
                    .header("host", "127.0.0.1")
                    .body(Empty::new())?;
                Ok::<bool, anyhow::Error>(sender.send_request(request).await?.status() == 200)
            };
            let ready = tokio::time::timeout(Duration::from_millis(500), ready)
                .await
                .is_ok_and(|ready| ready.unwrap_or(false));
            replica.ready.store(ready, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub struct Outcome {
    pub sent: u64,
    pub failed: u64,
}

/// `rate` requests per second of `body` to `/mutate` for `duration`, over `workers` connections.
pub async fn run(
    replicas: Arc<Vec<Replica>>,
    connector: TlsConnector,
    body: Bytes,
    rate: u64,
    duration: Duration,
    workers: u64,
) -> Outcome {
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let turn = Arc::new(AtomicUsize::new(0));
    let per_worker = rate / workers;
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (replicas, connector, body) = (replicas.clone(), connector.clone(), body.clone());
        let (sent, failed, turn) = (sent.clone(), failed.clone(), turn.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_worker as u32);
            let mut connection: Option<(usize, SendRequest<Full<Bytes>>)> = None;
            let deadline = tokio::time::Instant::now() + duration;
            while tokio::time::Instant::now() < deadline {
                tick.tick().await;
                sent.fetch_add(1, Ordering::Relaxed);
                let ok = send(&replicas, &connector, &body, &turn, &mut connection).await;
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await.ok();
    }
    Outcome {
        sent: sent.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
    }
}

async fn send(
    replicas: &[Replica],
    connector: &TlsConnector,
    body: &Bytes,
    turn: &AtomicUsize,
    connection: &mut Option<(usize, SendRequest<Full<Bytes>>)>,
) -> bool {
    let usable = connection.as_ref().is_some_and(|(index, sender)| {
        replicas[*index].ready.load(Ordering::Relaxed) && !sender.is_closed()
    });
    if !usable {
        *connection = None;
        let ready: Vec<usize> = (0..replicas.len())
            .filter(|index| replicas[*index].ready.load(Ordering::Relaxed))
            .collect();
        if ready.is_empty() {
            return false;
        }
        let index = ready[turn.fetch_add(1, Ordering::Relaxed) % ready.len()];
        match connect(connector, replicas[index].port).await {
            Ok(sender) => *connection = Some((index, sender)),
            Err(_) => return false,
        }
    }
    let Some((index, sender)) = connection.as_mut() else {
        return false;
    };
    let Ok(request) = hyper::Request::post("/mutate")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
    else {
        return false;
    };
    if sender.ready().await.is_err() {
        *connection = None;
        return false;
    }
    let index = *index;
    match sender.send_request(request).await {
        Ok(response) => {
            let close = response
                .headers()
                .get("connection")
                .is_some_and(|value| value == "close");
            let ok = response.status() == 200 && response.into_body().collect().await.is_ok();
            if ok {
                replicas[index].answered.fetch_add(1, Ordering::Relaxed);
            }
            if close {
                *connection = None;
            }
            ok
        }
        Err(_) => {
            *connection = None;
            false
        }
    }
}
