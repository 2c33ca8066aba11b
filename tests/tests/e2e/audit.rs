//! Reading the local cluster's audit log (tests/cluster/audit-policy.yaml records DELETE, LIST
//! and WATCH requests), to count what kube-retention asked of the API server.

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
    let log = std::fs::read_to_string(ns.env.cluster.layout.state("logs/audit.log"))?;
    Ok(log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["stage"] == "ResponseComplete"
                && event["verb"] == verb
                && event["user"]["username"] == user
                && event["objectRef"]["resource"] == resource
                && namespace.is_none_or(|namespace| event["objectRef"]["namespace"] == namespace)
        })
        .collect())
}

/// The lists of `resource` by `user` received at or after `since`, by how they were sent.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lists {
    /// Paged: first pages only (a list of many objects takes several).
    pub paged: usize,
    /// Streamed: watches with `sendInitialEvents`, counted when the API server starts answering
    /// (a watch completes only when it ends).
    pub streamed: usize,
    /// Streamed lists the API server refused.
    pub refused: usize,
}

impl Lists {
    /// The lists that were answered, paged or streamed.
    pub fn total(&self) -> usize {
        self.paged + self.streamed
    }
}

/// How often `user` listed `resource` of API `group` ("" for the core group), anywhere, since
/// `since`, paged or streamed.
pub fn lists(
    ns: &TestNamespace,
    user: &str,
    group: &str,
    resource: &str,
    since: Timestamp,
) -> Result<Lists> {
    let mut lists = Lists::default();
    for event in since_by(ns, user, since)?.iter().filter(|event| {
        event["objectRef"]["resource"] == resource
            && event["objectRef"]["apiGroup"].as_str().unwrap_or_default() == group
    }) {
        let uri = event["requestURI"].as_str().unwrap_or_default();
        match (event["verb"].as_str(), event["stage"].as_str()) {
            (Some("list"), Some("ResponseComplete")) if !uri.contains("continue=") => {
                lists.paged += 1;
            }
            (Some("watch"), _) if is_refused_stream(event) => lists.refused += 1,
            (Some("watch"), Some("ResponseStarted"))
                if uri.contains("sendInitialEvents=true") && !refused(event) =>
            {
                lists.streamed += 1;
            }
            _ => {}
        }
    }
    Ok(lists)
}

/// How many streamed lists of any resource the API server refused `user` since `since`.
pub fn refused_streams(ns: &TestNamespace, user: &str, since: Timestamp) -> Result<usize> {
    Ok(since_by(ns, user, since)?
        .iter()
        .filter(|event| is_refused_stream(event))
        .count())
}

/// A streamed list refused: counted once, when its request completes.
fn is_refused_stream(event: &Value) -> bool {
    event["verb"] == "watch"
        && event["stage"] == "ResponseComplete"
        && event["requestURI"]
            .as_str()
            .is_some_and(|uri| uri.contains("sendInitialEvents=true"))
        && refused(event)
}

fn refused(event: &Value) -> bool {
    event["responseStatus"]["code"]
        .as_u64()
        .is_some_and(|code| code >= 400)
}

/// Every recorded request of `user` received at or after `since`, at every stage recorded.
fn since_by(ns: &TestNamespace, user: &str, since: Timestamp) -> Result<Vec<Value>> {
    let log = std::fs::read_to_string(ns.env.cluster.layout.state("logs/audit.log"))?;
    Ok(log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["user"]["username"] == user
                && event["requestReceivedTimestamp"]
                    .as_str()
                    .and_then(|at| at.parse::<Timestamp>().ok())
                    .is_some_and(|at| at >= since)
        })
        .collect())
}
