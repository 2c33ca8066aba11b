//! The deletion ledger's sink for `controller-bench --only ledger`: an HTTP listener on
//! 127.0.0.2 (the one loopback address the benchmark's controller is allowed to reach, with
//! `--cloud-event-sink-allow=127.0.0.2/32`) that answers 202 to every CloudEvent and counts the
//! `dev.retention.deleted` ones, so the table can say how many deletions were announced.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Result;
use kube_retention_common::ledger::DELETED;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

pub struct LedgerSink {
    pub url: String,
    announced: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl LedgerSink {
    pub async fn start() -> Result<Self> {
        let listener = TcpListener::bind(("127.0.0.2", 0)).await?;
        let url = format!("http://{}/", listener.local_addr()?);
        let announced = Arc::new(AtomicUsize::new(0));
        let counted = announced.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    if let Ok(true) = serve(stream).await {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        Ok(Self {
            url,
            announced,
            task,
        })
    }

    /// `dev.retention.deleted` events acknowledged so far.
    pub fn announced(&self) -> usize {
        self.announced.load(Ordering::SeqCst)
    }

    /// The controller flags that point its ledger here.
    pub fn flags(&self) -> Vec<String> {
        vec![
            format!("--ledger-sink={}", self.url),
            "--cloud-event-sink-allow=127.0.0.2/32".into(),
        ]
    }
}

impl Drop for LedgerSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request, answers 202: whether it was a deletion's event.
async fn serve(stream: tokio::net::TcpStream) -> Result<bool> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let (mut length, mut deleted) = (0, false);
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "ce-type" => deleted = value.trim() == DELETED,
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut stream = reader.into_inner();
    stream
        .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await?;
    stream.shutdown().await.ok();
    Ok(deleted)
}
