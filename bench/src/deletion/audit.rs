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
        let requests = audited(cluster, offset, user, ns)?;
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

/// Requests by `user` in `namespace` recorded after `offset` bytes of the audit log, by verb.
pub(super) fn audited(
    cluster: &LocalCluster,
    offset: usize,
    user: &str,
    namespace: &str,
) -> Result<std::collections::BTreeMap<String, usize>> {
    let log = std::fs::read(cluster.layout.audit_log())?;
    let mut counts = std::collections::BTreeMap::new();
    for line in log[offset.min(log.len())..].split(|byte| *byte == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] == user && event["objectRef"]["namespace"] == namespace {
            let resource = event["objectRef"]["resource"].as_str().unwrap_or_default();
            let verb = event["verb"].as_str().unwrap_or_default();
            *counts.entry(format!("{verb} {resource}")).or_default() += 1;
        }
    }
    Ok(counts)
}

/// Every request by `user` recorded after `offset` bytes of the audit log, in any namespace or
/// none (lists and watches across namespaces, access reviews, discovery).
pub fn audited_everywhere(cluster: &LocalCluster, offset: usize, user: &str) -> Result<usize> {
    let log = std::fs::read(cluster.layout.audit_log())?;
    Ok(log[offset.min(log.len())..]
        .split(|byte| *byte == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(|event| event["user"]["username"] == user)
        .count())
}
