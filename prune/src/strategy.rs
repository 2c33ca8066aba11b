//! The strategies: which of one kind's finished objects in one namespace go. Two of them keep
//! "the newest N", and they are different rules, named apart so that "keep N" never means two
//! things: [`Strategy::Limits`] is the controller's count limits (`succeededLimit` and
//! `failedLimit`: per outcome, by creation time), answered by the function the controller calls
//! (`kube_retention_common::limits`), so a prune and the controller cannot disagree;
//! [`Strategy::NewestFinished`] is a rule of this crate's own, by finish time across outcomes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::api::DynamicObject;
use kube_retention_common::limits;
use kube_retention_common::progress::Outcome;

use crate::decision::Decision;

/// A finished object the strategies choose from: neither annotated `retention.dev/keep` nor
/// already being deleted.
#[derive(Debug, Clone)]
pub struct FinishedObject<'a> {
    pub object: &'a DynamicObject,
    pub outcome: Outcome,
    /// When it finished (its creation time when it does not say).
    pub finished: Timestamp,
}

/// Chooses, from one kind's finished objects in one namespace (newest first), which to prune.
pub type ChooseFn = Arc<dyn Fn(&[FinishedObject<'_>], Timestamp) -> Vec<usize> + Send + Sync>;

/// Which finished objects go. With several strategies, an object goes when any chooses it.
#[derive(Clone)]
pub enum Strategy {
    /// The controller's count limits, as a RetentionPolicy's `succeededLimit` and `failedLimit`
    /// (without `groupBy`): per kind and namespace, keep the newest `succeeded` succeeded and the
    /// newest `failed` failed objects by creation time; `None` leaves that outcome alone.
    /// Running objects never count; objects annotated `retention.dev/keep` or already being
    /// deleted are left out of the count. Computed by
    /// [`kube_retention_common::limits::over_limit`], the controller's own function. (A parent's
    /// limits, a Build's over its BuildRuns, count that parent's runs: select them by label.)
    Limits {
        succeeded: Option<u32>,
        failed: Option<u32>,
    },
    /// Keep the newest `n` finished objects per kind and namespace by finish time, succeeded
    /// and failed together. Not the controller's limits (that is [`Strategy::Limits`]). Objects
    /// already being deleted take no place among the kept.
    NewestFinished(usize),
    /// Prune objects finished longer ago than this.
    MaxAge(Duration),
    /// Your own choice: indices into the candidates, newest first.
    Custom { name: String, choose: ChooseFn },
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits { succeeded, failed } => {
                write!(
                    f,
                    "Limits {{ succeeded: {succeeded:?}, failed: {failed:?} }}"
                )
            }
            Self::NewestFinished(count) => write!(f, "NewestFinished({count})"),
            Self::MaxAge(age) => write!(f, "MaxAge({age:?})"),
            Self::Custom { name, .. } => write!(f, "Custom({name})"),
        }
    }
}

/// One kind's objects in one namespace, as the strategies see them.
pub(crate) struct Group<'a> {
    /// The finished objects the strategies choose from, newest finished first.
    pub(crate) candidates: Vec<FinishedObject<'a>>,
    /// Every run of the group (finished, running, kept, being deleted), as the controller
    /// counts them for its limits.
    pub(crate) runs: Vec<limits::LimitedRun<'a>>,
    /// The index into `candidates` of each run, for those that are candidates.
    pub(crate) candidate_of_run: Vec<Option<usize>>,
}

impl Strategy {
    /// The candidates (by index) this strategy prunes, each with why.
    pub(crate) fn choose(&self, group: &Group<'_>, now: Timestamp) -> Vec<(usize, Decision)> {
        let candidates = &group.candidates;
        match self {
            Self::Limits { succeeded, failed } => {
                limits::over_limit(&group.runs, *succeeded, *failed)
                    .into_iter()
                    .filter_map(|run| {
                        let index = (*group.candidate_of_run.get(run)?)?;
                        let outcome = candidates[index].outcome;
                        let limit = match outcome {
                            Outcome::Succeeded => (*succeeded)?,
                            Outcome::Failed => (*failed)?,
                        };
                        Some((index, Decision::Limits { outcome, limit }))
                    })
                    .collect()
            }
            Self::NewestFinished(limit) => (*limit..candidates.len())
                .map(|index| (index, Decision::NewestFinished { limit: *limit }))
                .collect(),
            Self::MaxAge(age) => {
                let age = SignedDuration::try_from(*age).unwrap_or(SignedDuration::MAX);
                let oldest = now.checked_sub(age).unwrap_or(Timestamp::MIN);
                let decision = Decision::MaxAge {
                    limit: format!("{age:#}"),
                };
                (0..candidates.len())
                    .filter(|&index| candidates[index].finished < oldest)
                    .map(|index| (index, decision.clone()))
                    .collect()
            }
            Self::Custom { name, choose } => choose(candidates, now)
                .into_iter()
                .map(|index| {
                    let decision = Decision::Custom {
                        strategy: name.clone(),
                    };
                    (index, decision)
                })
                .collect(),
        }
    }
}
