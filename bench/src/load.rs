//! HTTPS load: POSTs of prepared bodies over keep-alive HTTP/1.1 connections, either open-loop
//! at a fixed rate (latency counted from when each request was due, so queueing shows) or
//! closed-loop as fast as the server answers (saturation).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::sync::{Mutex, mpsc};
use tokio_rustls::TlsConnector;

/// Where to send what: requests are taken round-robin.
pub struct Target {
    pub address: SocketAddr,
    pub connector: TlsConnector,
    pub requests: Vec<(&'static str, Bytes)>,
}

/// What a load phase measured. Latencies are in microseconds.
pub struct Outcome {
    pub completed: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn throughput(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64()
    }

    /// Pools `other`, a later slice of the same step, into this outcome.
    pub fn pool(&mut self, other: Outcome) {
        self.completed += other.completed;
        self.errors += other.errors;
        self.latency.add(&other.latency).ok();
        self.elapsed += other.elapsed;
    }

    /// A latency percentile in milliseconds.
    pub fn millis(&self, percentile: f64) -> f64 {
        self.latency.value_at_quantile(percentile / 100.0) as f64 / 1000.0
    }
}

pub type Sender = SendRequest<Full<Bytes>>;

async fn connect(target: &Target) -> Result<Sender> {
    let tcp = tokio::net::TcpStream::connect(target.address).await?;
    tcp.set_nodelay(true)?;
    let tls = target
        .connector
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// What a POST came to, once the connection held.
pub enum Reply {
    /// 200, with the whole body.
    Body(Bytes),
    /// Any other status.
    Status(hyper::StatusCode),
}

/// POSTs `body` to `path` on `sender`, connecting first if it is gone. An error means the
/// connection failed, and `sender` is dropped for the next try to reconnect.
pub async fn post(
    target: &Target,
    sender: &mut Option<Sender>,
    path: &str,
    body: &Bytes,
) -> Result<Reply> {
    if sender.as_ref().is_none_or(|sender| sender.is_closed()) {
        *sender = Some(connect(target).await?);
    }
    let Some(connection) = sender.as_mut() else {
        anyhow::bail!("no connection");
    };
    let request = hyper::Request::post(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))?;
    let sent = match connection.ready().await {
        Ok(()) => connection.send_request(request).await,
        Err(error) => Err(error),
    };
    let response = match sent {
        Ok(response) => response,
        Err(error) => {
            *sender = None;
            return Err(error.into());
        }
    };
    if response.status() != 200 {
        return Ok(Reply::Status(response.status()));
    }
    Ok(Reply::Body(
        response.into_body().collect().await?.to_bytes(),
    ))
}

/// One request of the target's round-robin on `sender`; true when answered 200.
async fn send(target: &Target, sender: &mut Option<Sender>, index: usize) -> bool {
    let (path, body) = &target.requests[index % target.requests.len()];
    matches!(post(target, sender, path, body).await, Ok(Reply::Body(_)))
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 60 s at 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("constant, valid bounds")
}

/// Sends `rate` requests per second for `duration` over up to `connections` connections.
pub async fn fixed_rate(
    target: Arc<Target>,
    rate: u64,
    duration: Duration,
    connections: usize,
) -> Outcome {
    let total = rate * duration.as_secs();
    let (due_tx, due_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let due_rx = Arc::new(Mutex::new(due_rx));
    // Connected and handshaken before the schedule starts: as the API server keeps its
    // connections to a webhook, the steps measure answers, not TLS handshakes.
    let mut senders = Vec::new();
    for _ in 0..connections {
        senders.push(connect(&target).await.ok());
    }
    let mut workers = Vec::new();
    for mut sender in senders {
        let (target, due_rx) = (target.clone(), due_rx.clone());
        workers.push(tokio::spawn(async move {
            let (mut latency, mut errors) = (histogram(), 0u64);
            loop {
                let next = due_rx.lock().await.recv().await;
                let Some((index, due)) = next else { break };
                if send(&target, &mut sender, index).await {
                    latency.saturating_record(due.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (latency, errors)
        }));
    }
    // The schedule runs on a thread of its own: std's sleep wakes within tens of microseconds,
    // where the async timer's millisecond ticks would add up to a millisecond of false latency.
    let start = Instant::now();
    let interval = Duration::from_secs(1).as_nanos() as u64 / rate.max(1);
    let dispatcher = std::thread::spawn(move || {
        for index in 0..total {
            let due = start + Duration::from_nanos(index * interval);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if due_tx.send((index as usize, due)).is_err() {
                break;
            }
        }
    });
    tokio::task::spawn_blocking(move || dispatcher.join())
        .await
        .ok();
    collect(workers, start).await
}

/// Sends as fast as `connections` connections are answered, for `duration`.
pub async fn saturate(target: Arc<Target>, duration: Duration, connections: usize) -> Outcome {
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..connections {
        let target = target.clone();
        workers.push(tokio::spawn(async move {
            let (mut latency, mut errors, mut sender) = (histogram(), 0u64, None);
            let mut index = worker;
            while start.elapsed() < duration {
                let sent = Instant::now();
                if send(&target, &mut sender, index).await {
                    latency.saturating_record(sent.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
                index += connections;
            }
            (latency, errors)
        }));
    }
    collect(workers, start).await
}

async fn collect(
    workers: Vec<tokio::task::JoinHandle<(Histogram<u64>, u64)>>,
    start: Instant,
) -> Outcome {
    let mut outcome = Outcome {
        completed: 0,
        errors: 0,
        latency: histogram(),
        elapsed: Duration::ZERO,
    };
    for worker in workers {
        if let Ok((latency, errors)) = worker.await {
            outcome.latency.add(&latency).ok();
            outcome.errors += errors;
        }
    }
    outcome.elapsed = start.elapsed();
    outcome.completed = outcome.latency.len();
    outcome
}
