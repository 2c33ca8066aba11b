//! `kubectl retention prune --ledger-sink URL`: each object the prune deleted, announced to the
//! deletion ledger as the controller announces its own — a CloudEvent `dev.retention.deleted`
//! with `reason: prune`, `decidedBy: kubectl retention prune` and the rule that chose it — so a
//! ledger sees every deletion kube-retention makes, wherever it runs.
//!
//! The prune runs with its user's permissions and network position, so the sink is theirs to
//! name: the sink policy allows exactly the URL's host (and, for a name, the addresses it
//! resolves to now), which lets a local sink on 127.0.0.1 or `localhost` through, and nothing
//! else. Delivery is retried three times, 10 s at most each; what was not delivered is said,
//! and the command fails.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use http::Uri;
use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_common::sink_policy::{DEFAULT_SCHEMES, SinkPolicy};
use kube_retention_runtime::sinks::{self, Delivery, Sender};
use tokio::task::JoinSet;

/// Where the events say they come from.
pub const SOURCE: &str = "kubectl-retention-prune";

/// Deliveries under way at once.
const IN_FLIGHT: usize = 16;

/// How prune's announcements are delivered.
pub fn delivery() -> Delivery {
    Delivery {
        attempts: 3,
        first_backoff: Duration::from_secs(1),
        timeout: Duration::from_secs(10),
    }
}

/// Announces each of `entries` to `sink`; fails naming how many were not delivered.
pub async fn announce(sink: &str, entries: Vec<Entry>, delivery: Delivery) -> Result<()> {
    let sender = Arc::new(Sender::new(Arc::new(policy_for(sink).await?)));
    let total = entries.len();
    let mut pending = entries.into_iter();
    let mut running = JoinSet::new();
    let mut failures = Vec::new();
    loop {
        while running.len() < IN_FLIGHT
            && let Some(entry) = pending.next()
        {
            let (sender, sink, delivery) = (sender.clone(), sink.to_owned(), delivery.clone());
            running.spawn(async move {
                let event = sinks::ledger_event(DELETED, SOURCE, &entry)?;
                sender
                    .deliver(&sink, event, &delivery)
                    .await
                    .map_err(|undelivered| anyhow::anyhow!(undelivered.note(&sink)))
            });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        if let Err(error) = done.context("an announcement's task")? {
            failures.push(error.to_string());
        }
    }
    if let Some(first) = failures.first() {
        bail!(
            "{} of {total} deletions not announced to the ledger: {first}",
            failures.len()
        );
    }
    eprintln!("announced {total} deletions to {sink}");
    Ok(())
}

/// The policy that lets exactly `sink`'s host through.
async fn policy_for(sink: &str) -> Result<SinkPolicy> {
    let uri: Uri = sink
        .parse()
        .with_context(|| format!("--ledger-sink {sink:?} is not a URL"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if !DEFAULT_SCHEMES.contains(&scheme) {
        bail!("--ledger-sink {sink:?} is not an http(s) URL");
    }
    let host = uri
        .host()
        .with_context(|| format!("--ledger-sink {sink:?} names no host"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses = sinks::addresses_of(&uri)
        .await
        .with_context(|| format!("--ledger-sink {sink:?} names no host"))?
        .with_context(|| format!("resolving --ledger-sink's host {bare}"))?;
    // The name (an address allows itself) and the addresses it stands for now.
    let mut allow = vec![bare.to_owned()];
    allow.extend(addresses.iter().map(ToString::to_string));
    let schemes = DEFAULT_SCHEMES.map(str::to_owned);
    Ok(SinkPolicy::from_flags(&schemes, &allow, &[])?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use std::sync::Mutex;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    use super::*;

    /// A sink on 127.0.0.1 (loopback, which the controller's policy denies) keeping each body.
    async fn sink() -> (String, Arc<Mutex<Vec<Value>>>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut reader = BufReader::new(stream);
                let (mut line, mut length) = (String::new(), 0);
                reader.read_line(&mut line).await.unwrap();
                loop {
                    line.clear();
                    reader.read_line(&mut line).await.unwrap();
                    let Some((name, value)) = line.trim_end().split_once(':') else {
                        break;
                    };
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).await.unwrap();
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                let mut stream = reader.into_inner();
                stream
                    .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
            }
        });
        (url, bodies)
    }

    fn entry(name: &str) -> Entry {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job", "namespace": "ci", "name": name,
            "uid": format!("uid-{name}"), "reason": "prune",
            "decidedBy": "kubectl retention prune", "setting": "finished over 1h ago",
            "time": "2026-01-01T00:00:00Z"}))
        .unwrap()
    }

    #[tokio::test]
    async fn each_deletion_reaches_a_local_sink_the_controllers_policy_would_refuse() {
        let (url, bodies) = sink().await;
        let entries: Vec<Entry> = (0..20).map(|index| entry(&format!("j{index}"))).collect();
        announce(&url, entries, delivery()).await.unwrap();
        let mut names: Vec<String> = bodies
            .lock()
            .unwrap()
            .iter()
            .map(|body| body["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        let mut expected: Vec<String> = (0..20).map(|index| format!("j{index}")).collect();
        expected.sort();
        assert_eq!(names, expected);
        assert_eq!(bodies.lock().unwrap()[0]["reason"], "prune");
    }

    #[tokio::test]
    async fn what_is_not_delivered_fails_the_command_saying_how_much() {
        // Nothing listens there: every attempt fails.
        let closed = {
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
            listener.local_addr().unwrap()
        };
        let quick = Delivery {
            attempts: 1,
            first_backoff: Duration::from_millis(1),
            timeout: Duration::from_millis(200),
        };
        let url = format!("http://{closed}/");
        let error = announce(&url, vec![entry("a"), entry("b")], quick)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("2 of 2 deletions not announced to the ledger: CloudEvent to"),
            "{error}"
        );
        let error = announce("ftp://ledger.example/", vec![entry("a")], delivery())
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "--ledger-sink \"ftp://ledger.example/\" is not an http(s) URL"
        );
    }
}
