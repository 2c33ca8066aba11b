//! An HTTP sink for CloudEvents run by the test: it records each request's headers and body and
//! answers 202 (or 503 during an outage it is told of, [`Sink::down_until`]). It listens on
//! 127.0.0.2, the one loopback address the local controller's sink policy allows
//! (`components::SINK_ALLOW`), or where [`Sink::start_on`] says, over TLS when given an acceptor
//! (the as-shipped suite's https sink); and a Cleaner that announces to it
//! ([`apply_announcing_cleaner`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube_retention_e2e::components::SINK_ADDRESS;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::support::TestNamespace;

/// A request the sink received: lower-cased headers and the body as JSON.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Value,
    /// When it was answered.
    pub at: jiff::Timestamp,
}

pub struct Sink {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    refused: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start() -> Result<Self> {
        Self::start_on(SINK_ADDRESS, None).await
    }

    /// A sink on `address`, serving https with `tls` (its URL names the address, which the
    /// certificate must cover), else http.
    pub async fn start_on(address: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> Result<Self> {
        Self::serving(address, tls, None).await
    }

    /// A sink that answers 503 (and keeps nothing) until `down_until`, then 202: an outage.
    pub async fn down_until(down_until: tokio::time::Instant) -> Result<Self> {
        Self::serving(SINK_ADDRESS, None, Some(down_until)).await
    }

    async fn serving(
        address: &str,
        tls: Option<tokio_rustls::TlsAcceptor>,
        down_until: Option<tokio::time::Instant>,
    ) -> Result<Self> {
        let listener = TcpListener::bind((address, 0)).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}/", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let recorded = received.clone();
        let refused = Arc::new(AtomicUsize::new(0));
        let refusals = refused.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let recorded = recorded.clone();
                let tls = tls.clone();
                let down = down_until.is_some_and(|until| tokio::time::Instant::now() < until);
                if down {
                    refusals.fetch_add(1, Ordering::SeqCst);
                }
                tokio::spawn(async move {
                    let served = match tls {
                        Some(tls) => match tls.accept(stream).await {
                            Ok(stream) => serve(stream, down).await,
                            Err(error) => Err(error.into()),
                        },
                        None => serve(stream, down).await,
                    };
                    if let Ok(request) = served
                        && !down
                    {
                        recorded
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(request);
                    }
                });
            }
        });
        Ok(Self {
            url,
            received,
            refused,
            task,
        })
    }

    /// Requests answered 503 during the outage.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// The requests it acknowledged (202).
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Creates the empty ConfigMap `name` and, with `kubectl apply`, a Cleaner `name` that deletes
/// it a second later and announces that to `sink`; answers what kubectl said on standard error
/// (admission's warnings).
pub async fn apply_announcing_cleaner(
    ns: &TestNamespace,
    name: &str,
    sink: &str,
) -> Result<String> {
    let config_map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<ConfigMap>::namespaced(ns.env.client.clone(), &ns.name)
        .create(&PostParams::default(), &config_map)
        .await
        .with_context(|| format!("creating ConfigMap {name}"))?;
    let cleaner = json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name},
        "spec": {"ttl": "1s", "cloudEventSink": sink,
                 "targets": [{"name": "settings", "delete": true,
                              "reference": {"version": "v1", "kind": "ConfigMap", "name": name}}]}});
    let output = kube_retention_e2e::output_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &cleaner.to_string(),
    )?;
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    anyhow::ensure!(output.status.success(), "kubectl apply: {said}");
    Ok(said)
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    down: bool,
) -> Result<Received> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut headers = HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|length| length.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut stream = reader.into_inner();
    let answer: &[u8] = if down {
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    } else {
        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    };
    stream.write_all(answer).await?;
    stream.shutdown().await.ok();
    Ok(Received {
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: jiff::Timestamp::now(),
    })
}
