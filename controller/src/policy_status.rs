//! A retention policy's status: `Ready` (and why not: an invalid spec, a kind the cluster does
//! not serve, verbs the controller lacks), what it governs now, its next deletion, deletions so
//! far, and in dry run what it would have deleted, [`rendered`] for the one status writer
//! ([`kube_retention_io::status_writes`]), which retries failures.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::reflector::ObjectRef;
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::api::{PolicyStatus, WouldDelete};
use kube_retention_common::expiry::format_timestamp;
use kube_retention_common::field_error::summary;
use kube_retention_common::kinds::{Registry, group_of, qualified};

use crate::discovery::Scan;
use kube_retention_io::status_writes::StatusOf;
use kube_retention_state::{
    GuardReport, LoadedPolicy, ObjectKey, PolicyKey, Reason, Standing, Summary,
};

/// The policy `key`, as the status writer names what it writes.
pub fn status_of(key: &PolicyKey) -> StatusOf {
    match &key.namespace {
        Some(namespace) => ObjectRef::<RetentionPolicy>::new(&key.name)
            .within(namespace)
            .erase(),
        None => ObjectRef::<ClusterRetentionPolicy>::new(&key.name).erase(),
    }
}

/// `status` as it is written: absent fields as null (a merge patch would keep their stale
/// values), and no dry-run deletions as an empty list. An error where it cannot be serialized:
/// nothing is written then (a merge patch of `null` would remove the whole status).
pub fn rendered(status: &PolicyStatus) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(status)?;
    if let Some(map) = value.as_object_mut() {
        for field in ["nextDeletion", "limits"] {
            map.entry(field).or_insert(serde_json::Value::Null);
        }
        map.entry("wouldDelete").or_insert(serde_json::json!([]));
    }
    Ok(value)
}

pub struct Inputs<'a> {
    pub key: &'a PolicyKey,
    pub loaded: &'a LoadedPolicy,
    /// The latest scan (`None` until the first one).
    pub scan: Option<&'a Scan>,
    pub summary: Summary,
    pub deletions: u64,
    pub kinds: &'a Registry,
    /// The time, for a condition that changes.
    pub now: jiff::Timestamp,
    /// The status last written, whose condition keeps its transition time when unchanged.
    pub previous: Option<&'a PolicyStatus>,
}

pub fn compute(inputs: &Inputs<'_>) -> PolicyStatus {
    let rules = &inputs.loaded.rules;
    let (status, reason, message) = readiness(inputs);
    let previous = inputs.previous.and_then(|previous| {
        previous
            .conditions
            .iter()
            .find(|condition| condition.type_ == "Ready")
    });
    let last_transition_time = previous
        .filter(|previous| previous.status == status)
        .map_or_else(
            || Time(inputs.now),
            |previous| previous.last_transition_time.clone(),
        );
    let condition = Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time,
        observed_generation: inputs.loaded.generation,
    };
    let kinds: Vec<String> = rules
        .kinds
        .iter()
        .map(|kind| qualified(&kind.kind, group_of(&kind.api_version)))
        .collect();
    let limit = |limit: Option<u32>| limit.map_or("-".to_owned(), |limit| limit.to_string());
    let limits = (rules.succeeded_limit.is_some() || rules.failed_limit.is_some()).then(|| {
        let per = rules.group_by.as_deref().unwrap_or("namespace");
        format!(
            "{}/{} per {per}",
            limit(rules.succeeded_limit),
            limit(rules.failed_limit)
        )
    });
    let summary = &inputs.summary;
    let standing = summary.guard.as_ref().map(|guard| guard.standing);
    let accepted_generation = match standing {
        None | Some(Standing::Accepted) => inputs.loaded.generation,
        Some(Standing::Counting | Standing::AwaitingApproval) => inputs.loaded.approval.accepted,
    };
    let listed = |key: &ObjectKey, at: &jiff::Timestamp, reason: &Reason| WouldDelete {
        kind: inputs.kinds[key.kind].resource.to_string(),
        namespace: key.namespace.to_string(),
        name: key.name.to_string(),
        at: format_timestamp(*at),
        reason: match reason {
            Reason::Ttl => "ttl".into(),
            Reason::Limit => "limit".into(),
        },
    };
    PolicyStatus {
        conditions: vec![condition],
        observed_generation: inputs.loaded.generation,
        kinds: Some(kinds.join(",")),
        limits,
        matched: summary.matched,
        on_hold: summary.on_hold,
        next_deletion: summary.next_deletion.map(format_timestamp),
        deletions: inputs.deletions,
        would_delete: summary
            .would_delete
            .iter()
            .map(|(key, at, reason)| listed(key, at, reason))
            .collect(),
        accepted_generation,
        held: summary
            .guard
            .iter()
            .filter(|guard| guard.standing == Standing::AwaitingApproval)
            .flat_map(|guard| &guard.sample)
            .map(|(key, at, reason)| listed(key, at, reason))
            .collect(),
    }
}

fn readiness(inputs: &Inputs<'_>) -> (&'static str, &'static str, String) {
    let loaded = inputs.loaded;
    if !loaded.errors.is_empty() {
        return ("False", "InvalidSpec", summary(&loaded.errors));
    }
    if let Some(report) = &inputs.summary.exceeded {
        let more = match report.count {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        let message = format!(
            "on {}/{}{more}, {}; such objects are treated as not matching",
            report.first.namespace, report.first.name, report.overran.how
        );
        // A bound of the evaluator's process, which stops the expression until the policy
        // changes, reads apart from the meter's limits, which stop one evaluation.
        let reason = match report.overran.process {
            true => "EvaluatorLimitExceeded",
            false => "CostLimitExceeded",
        };
        return ("False", reason, message);
    }
    let Some(scan) = inputs.scan else {
        return (
            "Unknown",
            "Discovering",
            "looking up the kinds it names".into(),
        );
    };
    let mut problems = Vec::new();
    let mut not_served = false;
    for kind in &loaded.rules.kinds {
        let group = group_of(&kind.api_version);
        match scan.served(group, &kind.kind) {
            None => {
                not_served = true;
                problems.push(format!(
                    "{} {} is not served by this cluster",
                    kind.api_version, kind.kind
                ));
            }
            Some(resource) => {
                let missing = scan.missing(resource);
                if !missing.is_empty() {
                    let name = qualified(&resource.plural, group);
                    problems.push(format!(
                        "the controller may not {} {name}: grant it with a ClusterRole labelled retention.dev/aggregate-to-controller: \"true\"",
                        missing.join(", ")
                    ));
                }
            }
        }
    }
    if problems.is_empty()
        && let Some(guard) = &inputs.summary.guard
        && let Some(held) = guarded(inputs, guard)
    {
        return held;
    }
    match (problems.is_empty(), not_served) {
        (true, _) => (
            "True",
            "Active",
            match inputs.summary.on_hold {
                0 => format!("governing {} objects", inputs.summary.matched),
                held => format!(
                    "governing {} objects, {held} of them on hold (spec.holdWhile)",
                    inputs.summary.matched
                ),
            },
        ),
        (false, true) => ("False", "KindNotServed", problems.join("; ")),
        (false, false) => ("False", "MissingPermissions", problems.join("; ")),
    }
}

/// The `Ready` condition while the blast-radius guard holds the policy's deletions.
fn guarded(
    inputs: &Inputs<'_>,
    guard: &GuardReport,
) -> Option<(&'static str, &'static str, String)> {
    let generation = inputs.loaded.generation.unwrap_or_default();
    match guard.standing {
        Standing::Accepted => None,
        Standing::Counting => Some((
            "Unknown",
            "Counting",
            format!(
                "generation {generation}: counting what it would delete at once (more than {} \
                 waits for approval); its deletions wait until the kinds it names are listed",
                guard.threshold
            ),
        )),
        Standing::AwaitingApproval => {
            let total: usize = guard.held.values().sum();
            let kinds: Vec<String> = guard
                .held
                .iter()
                .map(|(kind, count)| format!("{} {count}", inputs.kinds[*kind].resource))
                .collect();
            let approve = match &inputs.key.namespace {
                Some(namespace) => format!(
                    "kubectl retention approve policy {} -n {namespace}",
                    inputs.key.name
                ),
                None => format!(
                    "kubectl retention approve clusterpolicy {}",
                    inputs.key.name
                ),
            };
            Some((
                "False",
                "AwaitingApproval",
                format!(
                    "generation {generation} would delete {total} objects at once ({}), more than \
                     its threshold of {} (spec.safety.maxImmediateDeletions, else the \
                     controller's --max-immediate-deletions): nothing is deleted until approved \
                     with `{approve}`, or the policy changes",
                    kinds.join(", "),
                    guard.threshold,
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_status_clears_what_it_no_longer_says() {
        let written = rendered(&PolicyStatus::default()).expect("a status serializes");
        assert_eq!(written["nextDeletion"], serde_json::Value::Null);
        assert_eq!(written["limits"], serde_json::Value::Null);
        assert_eq!(written["wouldDelete"], serde_json::json!([]));
        assert!(
            written
                .as_object()
                .is_some_and(|map| map.contains_key("nextDeletion"))
        );
    }

    #[test]
    fn a_policy_is_named_by_its_scope() {
        let namespaced = status_of(&PolicyKey {
            namespace: Some("team-a".into()),
            name: "nightly".into(),
        });
        assert_eq!(namespaced.dyntype.plural, "retentionpolicies");
        assert_eq!(namespaced.namespace.as_deref(), Some("team-a"));
        let cluster = status_of(&PolicyKey {
            namespace: None,
            name: "nightly".into(),
        });
        assert_eq!(cluster.dyntype.plural, "clusterretentionpolicies");
        assert_eq!(cluster.name, "nightly");
    }
}
