//! Local sinks for the CloudEvent tests: listeners on a loopback address that count the
//! connections they accept and the requests they read, and answer as told; policies and
//! resolvers to send through.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses a part

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_sinks::guard::Lookup;
use kube_retention_sinks::{self as sinks, Delivery};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a local sink answers.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// 503 with a body to the first requests, then 202 (400 to a request that is no CloudEvent).
    FailFirst(u32),
    /// Reads the request and never answers.
    Never,
}

pub struct LocalSink {
    pub url: String,
    pub port: u16,
    accepted: Arc<AtomicU32>,
    requests: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalSink {
    /// Connections accepted.
    pub fn accepted(&self) -> u32 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Requests read.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for LocalSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A sink on `host` (a loopback address: Linux routes all of 127/8 to `lo`).
pub async fn serve(host: &str, answer: Answer) -> LocalSink {
    serve_at(host, 0, answer).await
}

/// A sink on `host`:`port` (0: any free port).
pub async fn serve_at(host: &str, port: u16, answer: Answer) -> LocalSink {
    let listener = TcpListener::bind((host, port)).await.expect("a port");
    let address = listener.local_addr().expect("an address");
    let accepted = Arc::new(AtomicU32::new(0));
    let requests = Arc::new(AtomicU32::new(0));
    let (accepts, reads) = (accepted.clone(), requests.clone());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            accepts.fetch_add(1, Ordering::SeqCst);
            let reads = reads.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
                let seen = reads.fetch_add(1, Ordering::SeqCst);
                let status = match answer {
                    Answer::Never => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    }
                    _ if !request.contains("ce-type: dev.retention.cleaner.deleted") => {
                        "400 Bad Request"
                    }
                    Answer::FailFirst(failures) if seen < failures => "503 Service Unavailable",
                    Answer::FailFirst(_) => "202 Accepted",
                };
                let body = "internal-secret";
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).await.ok();
            });
        }
    });
    LocalSink {
        url: format!("http://{address}/"),
        port: address.port(),
        accepted,
        requests,
        task,
    }
}

/// The default policy with `allow` on the allow list.
pub fn allowing(allow: &[&str]) -> Arc<SinkPolicy> {
    let allow: Vec<String> = allow.iter().map(|entry| (*entry).to_owned()).collect();
    let schemes = ["https".to_owned(), "http".to_owned()];
    Arc::new(SinkPolicy::from_flags(&schemes, &allow, &[]).expect("a policy"))
}

/// Attempts 10 ms apart, each given 300 ms.
pub fn quick(attempts: u32) -> Delivery {
    Delivery {
        attempts,
        first_backoff: Duration::from_millis(10),
        timeout: Duration::from_millis(300),
    }
}

pub fn event() -> cloudevents::Event {
    sinks::event(
        kube_retention_common::cleaner::EVENT_TYPE,
        "id",
        "/apis/retention.dev/v1alpha1/namespaces/n/cleaners/c",
        json!({"deleted": []}),
        jiff::Timestamp::now(),
    )
    .expect("an event")
}

/// A resolver answering from `answers`, one list of addresses per call in turn (the last one
/// again when they run out); counts its calls.
pub fn lookup(answers: HashMap<&'static str, Vec<Vec<&'static str>>>) -> (Lookup, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let lookup: Lookup = Arc::new(move |name: String| {
        let call = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let turns = answers.get(name.as_str()).cloned().unwrap_or_default();
        let addresses: Vec<IpAddr> = turns
            .get(call.min(turns.len().saturating_sub(1)))
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|address| address.parse().expect("an address"))
            .collect();
        Box::pin(async move { Ok(addresses) })
    });
    (lookup, calls)
}

/// A ledger without `--ledger-sink`, judging by the default sink policy: where a Cleaner's
/// CloudEvent goes. Its delivery task runs on (dropping its handle does not end it).
pub fn ledger() -> kube_retention_sinks::ledger::Ledger {
    ledger_with(Arc::new(sinks::Sender::new(
        Arc::new(SinkPolicy::default()),
    )))
}

/// A ledger without `--ledger-sink` sending through `sender`, delivering quickly.
pub fn ledger_with(sender: Arc<sinks::Sender>) -> kube_retention_sinks::ledger::Ledger {
    let delivery = Delivery {
        attempts: 2,
        first_backoff: Duration::from_millis(10),
        timeout: Duration::from_secs(2),
    };
    let metrics = kube_retention_sinks::ledger::LedgerMetrics::default();
    let (ledger, _tasks) =
        kube_retention_sinks::ledger::Ledger::spawn(sender, None, 100, delivery, metrics);
    ledger
}
