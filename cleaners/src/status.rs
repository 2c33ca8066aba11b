//! A Cleaner's status from its last evaluation: the targets resolved (the first hundred named), when it is evaluated next,
//! and two conditions — `Ready` (False with the reason when it cannot be evaluated or cleaned)
//! and `Waiting` (True while the TTL or a condition holds it back, naming which).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube_retention_common::cel::Exceeded;
use kube_retention_common::cleaner::{CleanerSpec, CleanerStatus, RESOLVED_NAMED, Verdict};

use kube_retention_helm::storage::HelmError;
use kube_retention_helm::uninstall::UninstallError;

/// The targets an evaluation resolved, as a status names them: the first [`RESOLVED_NAMED`],
/// sorted, and how many in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    named: Vec<String>,
    count: u64,
}

impl Resolved {
    /// Every target resolved, `names` sorted.
    pub fn all(mut names: Vec<String>) -> Self {
        let count = u64::try_from(names.len()).unwrap_or(u64::MAX);
        names.truncate(RESOLVED_NAMED);
        Self {
            named: names,
            count,
        }
    }

    /// The targets `status` names, as it was written.
    pub fn written(status: &CleanerStatus) -> Self {
        Self {
            named: status.resolved_targets.clone(),
            count: status.resolved_target_count.unwrap_or_else(|| {
                u64::try_from(status.resolved_targets.len()).unwrap_or(u64::MAX)
            }),
        }
    }
}

/// Why a Cleaner cannot be evaluated or cleaned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("the spec is invalid: {0}")]
    InvalidSpec(String),
    #[error("targets of {kind} cannot be read: {reason}")]
    TargetKind { kind: String, reason: String },
    #[error("the targets cannot be given to CEL: {0}")]
    Values(#[source] kube_retention_common::cel::ConversionError),
    #[error(transparent)]
    Helm(#[from] HelmError),
    #[error("cleaning failed, retried: {0}")]
    CleanFailed(String),
    /// The blast-radius guard holds the clean: more deletions at once than its threshold, and
    /// the generation not approved.
    #[error(
        "would delete {deletions} objects at once, more than the blast-radius guard allows \
         ({threshold}, --max-immediate-deletions): nothing is deleted until generation \
         {generation} is approved (kubectl retention approve cleaner {name} -n {namespace})"
    )]
    AwaitingApproval {
        deletions: usize,
        threshold: u32,
        generation: i64,
        namespace: String,
        name: String,
    },
}

impl From<UninstallError> for Problem {
    fn from(error: UninstallError) -> Self {
        match error {
            UninstallError::Refused(refused) => Self::Helm(refused),
            UninstallError::Failed(failed) => Self::CleanFailed(failed),
        }
    }
}

impl Problem {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidSpec(_) => "InvalidSpec",
            Self::TargetKind { .. } => "TargetKindUnavailable",
            Self::Values(_) => "TargetsUnreadable",
            Self::Helm(error) => error.reason(),
            Self::CleanFailed(_) => "CleanFailed",
            Self::AwaitingApproval { .. } => "AwaitingApproval",
        }
    }
}

/// The status to write after an evaluation of `spec` (the Cleaner's `generation`) whose outcome
/// is `verdict`; a condition that keeps its status keeps its `lastTransitionTime` from
/// `previous`, and each says the generation it observed.
pub fn status(
    spec: &CleanerSpec,
    generation: Option<i64>,
    verdict: &Result<Verdict, Problem>,
    resolved: Resolved,
    next: Option<Timestamp>,
    previous: Option<&CleanerStatus>,
    now: Timestamp,
) -> CleanerStatus {
    let ready = match verdict {
        Ok(Verdict::Failed {
            condition, error, ..
        }) if matches!(error.exceeded(), Some(Exceeded::Process(_))) => (
            "False",
            "EvaluatorLimitExceeded",
            format!("spec.conditions[{condition}]: {error}"),
        ),
        Ok(Verdict::Failed {
            condition, error, ..
        }) if error.exceeded().is_some() => (
            "False",
            "CostLimitExceeded",
            format!("spec.conditions[{condition}]: {error}"),
        ),
        Ok(Verdict::Failed {
            condition, error, ..
        }) => (
            "False",
            "ConditionError",
            format!("spec.conditions[{condition}]: {error}"),
        ),
        Err(problem) => ("False", problem.reason(), problem.to_string()),
        Ok(_) => (
            "True",
            "Evaluated",
            "the targets and conditions are evaluated".to_owned(),
        ),
    };
    let waiting = match verdict {
        Ok(Verdict::TooEarly { until }) => {
            let ttl = spec.ttl.as_deref().unwrap_or("0s");
            (
                "True",
                "TTLNotPassed",
                format!("the ttl of {ttl} passes at {until}"),
            )
        }
        Ok(Verdict::Wait {
            until,
            unmet,
            found,
        }) => {
            let source = spec.conditions.get(*unmet).map_or("", String::as_str);
            let until = to_second(*until);
            let next = if *found {
                format!("the conditions turn true at {until}")
            } else {
                format!("evaluated again at {until} or when a target changes")
            };
            let message = format!("spec.conditions[{unmet}] is false: {source}; {next}");
            ("True", "ConditionsFalse", message)
        }
        Ok(Verdict::Clean) => (
            "False",
            "Cleaning",
            "every condition holds: the group is deleted".to_owned(),
        ),
        Ok(Verdict::Failed { .. }) | Err(_) => (
            "False",
            "NotEvaluated",
            "see the Ready condition".to_owned(),
        ),
    };
    let previous_conditions = previous.map_or(&[][..], |status| &status.conditions[..]);
    let condition = |kind: &str, (state, reason, message): (&str, &str, String)| {
        let since = previous_conditions
            .iter()
            .find(|old| old.type_ == kind && old.status == state)
            .map_or(Time(now), |old| old.last_transition_time.clone());
        Condition {
            type_: kind.to_owned(),
            status: state.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: since,
            observed_generation: generation,
        }
    };
    CleanerStatus {
        resolved_targets: resolved.named,
        resolved_target_count: Some(resolved.count),
        next_scheduled_evaluation: next.map(|at| to_second(at).to_string()),
        conditions: vec![condition("Ready", ready), condition("Waiting", waiting)],
    }
}

/// Times in the status to the second; the schedule itself keeps its precision.
fn to_second(at: Timestamp) -> Timestamp {
    at.round(jiff::Unit::Second).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_names_the_first_hundred_targets_and_counts_them_all() {
        let names: Vec<String> = (0..10_001)
            .map(|index| format!("burst-{index:05}.configmaps/v1"))
            .collect();
        let resolved = Resolved::all(names.clone());
        let status = status(
            &CleanerSpec::default(),
            Some(1),
            &Ok(Verdict::Clean),
            resolved.clone(),
            None,
            None,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(status.resolved_targets, names[..RESOLVED_NAMED]);
        assert_eq!(status.resolved_target_count, Some(10_001));
        // Written again from the status, as a held clean is: the count is kept.
        assert_eq!(Resolved::written(&status), resolved);
    }
}
