//! Reading the local cluster's audit log (tests/cluster/audit-policy.yaml records DELETE, LIST
//! and WATCH requests), to count what kube-retention asked of the API server; lists, paged or
//! streamed, are counted by [`crate::lists`].

use anyhow::Result;
use jiff::Timestamp;
use serde_json::Value;

use crate::support::TestNamespace;

/// Completed requests with `verb` on `resource`, by `user`, optionally in one namespace.
pub fn requests(
    ns: &TestNamespace,
    user: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<Vec<Value>> {
    Ok(events(ns)?
        .into_iter()
        .filter(|event| {
            completed(event, verb)
                && event["user"]["username"] == user
                && event["objectRef"]["resource"] == resource
                && namespace.is_none_or(|namespace| event["objectRef"]["namespace"] == namespace)
        })
        .collect())
}

/// Whether `event` is a request with `verb` the API server answered (its `ResponseComplete`
/// stage: a request is recorded once a stage).
pub fn completed(event: &Value, verb: &str) -> bool {
    event["stage"] == "ResponseComplete" && event["verb"] == verb
}

/// Every event in the audit log.
pub fn events(ns: &TestNamespace) -> Result<Vec<Value>> {
    let log = std::fs::read_to_string(ns.env.cluster.layout.audit_log())?;
    Ok(log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect())
}

/// Every recorded request of `user` received at or after `since`, at every stage recorded.
pub fn since(ns: &TestNamespace, user: &str, since: Timestamp) -> Result<Vec<Value>> {
    Ok(events(ns)?
        .into_iter()
        .filter(|event| {
            event["user"]["username"] == user
                && event["requestReceivedTimestamp"]
                    .as_str()
                    .and_then(|at| at.parse::<Timestamp>().ok())
                    .is_some_and(|at| at >= since)
        })
        .collect())
}
