//! "Is it finished, how, and when": the finish rules of each run-to-completion kind.
//!
//! - Shipwright BuildRuns and any Knative-style object: the `Succeeded` condition, True or False;
//!   finished at `status.completionTime`, else the condition's `lastTransitionTime`.
//! - Jobs: a `Complete` or `Failed` condition that is True; finished at `status.completionTime`
//!   (success), else the condition's `lastTransitionTime`.
//! - Pods: phase `Succeeded` or `Failed`; finished at the latest container `terminated.finishedAt`.
//! - OpenShift-style Builds: phase `Complete` (success), `Failed`, `Error` or `Cancelled`;
//!   finished at `status.completionTimestamp`.
//!
//! Kinds with no such notion (ConfigMaps, Builds, ...) are [`Progress::NotARun`]. Each kind's
//! rule is a [`FinishRule`] in its registry entry.

use jiff::Timestamp;
use serde_json::Value;

use crate::json::field;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Succeeded,
    Failed,
}

/// A finished run. `at` is absent when the object says it finished but not when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub outcome: Outcome,
    pub at: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A run that has not finished: never deleted.
    Running,
    Finished(Finished),
    /// Not a run-to-completion object; only `retention.dev/ttl` or `expires-at` apply.
    NotARun,
}

/// How a kind says it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishRule {
    /// A Knative-style `Succeeded` condition; without one the object is running when
    /// `required`, else not a run at all.
    SucceededCondition { required: bool },
    /// A Job's `Complete` or `Failed` condition.
    JobConditions,
    /// A Pod's phase.
    PodPhase,
    /// An OpenShift-style Build's phase.
    OpenShiftPhase,
    /// Never finishes (a parent, a plain object).
    NotARun,
}

impl FinishRule {
    pub fn progress(self, object: &Value) -> Progress {
        match self {
            Self::SucceededCondition { required } => {
                let absent = if required {
                    Progress::Running
                } else {
                    Progress::NotARun
                };
                succeeded_condition(object).unwrap_or(absent)
            }
            Self::JobConditions => job(object),
            Self::PodPhase => pod(object),
            Self::OpenShiftPhase => openshift_build(object),
            Self::NotARun => Progress::NotARun,
        }
    }
}

impl Progress {
    pub fn finished(&self) -> Option<Finished> {
        match self {
            Self::Finished(finished) => Some(*finished),
            Self::Running | Self::NotARun => None,
        }
    }
}

fn timestamp(object: &Value, path: &str) -> Option<Timestamp> {
    field(object, path)?.as_str()?.parse().ok()
}

fn conditions(object: &Value) -> impl Iterator<Item = &Value> {
    field(object, "status.conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions(object).find(|condition| condition.get("type").and_then(Value::as_str) == Some(kind))
}

/// `Some(Running)` for a `Succeeded` condition that is Unknown, `None` without one.
fn succeeded_condition(object: &Value) -> Option<Progress> {
    let condition = condition(object, "Succeeded")?;
    let outcome = match condition.get("status").and_then(Value::as_str) {
        Some("True") => Outcome::Succeeded,
        Some("False") => Outcome::Failed,
        _ => return Some(Progress::Running),
    };
    let at = timestamp(object, "status.completionTime")
        .or_else(|| timestamp(condition, "lastTransitionTime"));
    Some(Progress::Finished(Finished { outcome, at }))
}

fn job(object: &Value) -> Progress {
    for (kind, outcome) in [
        ("Complete", Outcome::Succeeded),
        ("Failed", Outcome::Failed),
    ] {
        let Some(condition) = condition(object, kind) else {
            continue;
        };
        if condition.get("status").and_then(Value::as_str) != Some("True") {
            continue;
        }
        let at = match outcome {
            Outcome::Succeeded => timestamp(object, "status.completionTime"),
            Outcome::Failed => None,
        }
        .or_else(|| timestamp(condition, "lastTransitionTime"));
        return Progress::Finished(Finished { outcome, at });
    }
    Progress::Running
}

fn pod(object: &Value) -> Progress {
    let outcome = match field(object, "status.phase").and_then(Value::as_str) {
        Some("Succeeded") => Outcome::Succeeded,
        Some("Failed") => Outcome::Failed,
        _ => return Progress::Running,
    };
    let statuses = [
        "initContainerStatuses",
        "containerStatuses",
        "ephemeralContainerStatuses",
    ];
    let at = statuses
        .iter()
        .filter_map(|key| field(object, &format!("status.{key}"))?.as_array())
        .flatten()
        .filter_map(|status| timestamp(status, "state.terminated.finishedAt"))
        .max();
    Progress::Finished(Finished { outcome, at })
}

fn openshift_build(object: &Value) -> Progress {
    let outcome = match field(object, "status.phase").and_then(Value::as_str) {
        Some("Complete") => Outcome::Succeeded,
        Some("Failed" | "Error" | "Cancelled") => Outcome::Failed,
        _ => return Progress::Running,
    };
    let at = timestamp(object, "status.completionTimestamp");
    Progress::Finished(Finished { outcome, at })
}
