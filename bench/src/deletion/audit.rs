//! Requests counted from the API server's audit log (`bench/audit-policy.yaml` records the
//! deleters' requests only), per client and namespace, by verb and resource.

use std::time::Duration;

use anyhow::Result;
use kube_retention_e2e::LocalCluster;
use serde_json::Value;

/// Waits until the deleter's Events stop coming (none for 3 s; a minute at most): Events yield
/// to deletions and an aggregated one waits for its window, so counting at the last deletion
/// would miss them.
pub(super) async fn settle_events(
    cluster: &LocalCluster,
    offset: usize,
    user: &str,
    ns: &str,
) -> Result<()> {
    let events = || -> Result<usize> {
        let requests = audit(cluster, offset, user, ns)?.in_namespace;
        Ok(requests.get("create events").copied().unwrap_or(0))
    };
    let (mut last, mut quiet, started) = (events()?, 0, std::time::Instant::now());
    while quiet < 3 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = events()?;
        quiet = if now == last { quiet + 1 } else { 0 };
        last = now;
    }
    Ok(())
}

/// A client's requests recorded after an offset of the audit log.
pub struct Audited {
    /// In one namespace, by verb and resource (`delete jobs`).
    pub in_namespace: std::collections::BTreeMap<String, usize>,
    /// All of them, in any namespace or none (lists and watches across namespaces, access
    /// reviews, discovery).
    pub everywhere: usize,
}

/// Requests by `user` recorded after `offset` bytes of the audit log: those in `namespace` by
/// verb, and all of them. One pass over the log.
pub fn audit(
    cluster: &LocalCluster,
    offset: usize,
    user: &str,
    namespace: &str,
) -> Result<Audited> {
    let log = std::fs::read(cluster.layout.audit_log())?;
    let mut audited = Audited {
        in_namespace: std::collections::BTreeMap::new(),
        everywhere: 0,
    };
    for line in log[offset.min(log.len())..].split(|byte| *byte == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user {
            continue;
        }
        audited.everywhere += 1;
        if event["objectRef"]["namespace"] == namespace {
            let resource = event["objectRef"]["resource"].as_str().unwrap_or_default();
            let verb = event["verb"].as_str().unwrap_or_default();
            *audited
                .in_namespace
                .entry(format!("{verb} {resource}"))
                .or_default() += 1;
        }
    }
    Ok(audited)
}
