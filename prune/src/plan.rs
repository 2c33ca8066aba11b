//! The plan, as a pure function of the objects, the strategies and the clock: per kind and
//! namespace, finished objects newest first; each strategy names those to prune; running
//! objects, objects annotated `retention.dev/keep` and those a hook vetoes stay.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube_retention_common::annotations::KEEP;
use kube_retention_common::progress::Progress;
use serde::Serialize;

use crate::rules::Rules;

/// A finished object the strategies choose from.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub object: &'a DynamicObject,
    /// When it finished (its creation time when it does not say).
    pub finished: Timestamp,
}

/// Chooses, from one kind's finished objects in one namespace (newest first), which to prune.
pub type ChooseFn = Arc<dyn Fn(&[Candidate<'_>], Timestamp) -> Vec<usize> + Send + Sync>;

/// Which finished objects go. With several strategies, an object goes when any chooses it.
#[derive(Clone)]
pub enum Strategy {
    /// Keep the newest `n` finished objects per kind and namespace.
    MaxCount(usize),
    /// Prune objects finished longer ago than this.
    MaxAge(Duration),
    /// Your own choice: indices into the candidates, newest first.
    Custom { name: String, choose: ChooseFn },
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MaxCount(count) => write!(f, "MaxCount({count})"),
            Self::MaxAge(age) => write!(f, "MaxAge({age:?})"),
            Self::Custom { name, .. } => write!(f, "Custom({name})"),
        }
    }
}

/// Called before an object is pruned; an `Err` keeps it, with the reason.
pub type HookFn = Arc<dyn Fn(&DynamicObject) -> Result<(), String> + Send + Sync>;

/// Why an object is pruned or kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum Decision {
    /// Beyond the newest `limit`.
    MaxCount {
        limit: usize,
    },
    /// Finished longer ago than `limit` (Go-style duration text).
    MaxAge {
        limit: String,
    },
    Custom {
        strategy: String,
    },
    /// Within every limit.
    Kept,
    /// Not finished: never pruned.
    Running,
    /// Not a run-to-completion object by its kind's rule.
    NotARun,
    /// Annotated `retention.dev/keep: "true"`.
    KeepAnnotation,
    /// The hook said no.
    Vetoed {
        reason: String,
    },
}

impl Decision {
    pub fn prunes(&self) -> bool {
        matches!(
            self,
            Self::MaxCount { .. } | Self::MaxAge { .. } | Self::Custom { .. }
        )
    }
}

/// One object and what becomes of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planned {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub finished: Option<Timestamp>,
    #[serde(flatten)]
    pub decision: Decision,
}

/// Every object considered, those to prune first (oldest first), then those kept.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    pub objects: Vec<Planned>,
}

impl Plan {
    pub fn to_prune(&self) -> impl Iterator<Item = &Planned> {
        self.objects
            .iter()
            .filter(|planned| planned.decision.prunes())
    }
}

/// What decides a plan.
#[derive(Clone, Default)]
pub struct Settings {
    pub strategies: Vec<Strategy>,
    pub rules: Rules,
    pub hook: Option<HookFn>,
}

/// Plans what to prune of `objects` at `now`.
pub fn plan(objects: &[DynamicObject], settings: &Settings, now: Timestamp) -> Plan {
    let mut groups: BTreeMap<(String, String), Vec<&DynamicObject>> = BTreeMap::new();
    for object in objects {
        let kind = object
            .types
            .as_ref()
            .map(|types| types.kind.clone())
            .unwrap_or_default();
        groups
            .entry((kind, object.namespace().unwrap_or_default()))
            .or_default()
            .push(object);
    }
    let mut pruned = Vec::new();
    let mut kept = Vec::new();
    for ((kind, namespace), members) in groups {
        let planned =
            |object: &DynamicObject, finished: Option<Timestamp>, decision: Decision| Planned {
                kind: kind.clone(),
                namespace: namespace.clone(),
                name: object.name_any(),
                uid: object.uid().unwrap_or_default(),
                finished,
                decision,
            };
        let mut candidates = Vec::new();
        for object in members {
            let value = serde_json::to_value(object).unwrap_or_default();
            let created = object.creation_timestamp().map(|time| time.0);
            let decision = match settings.rules.progress(&value) {
                _ if object
                    .annotations()
                    .get(KEEP)
                    .is_some_and(|keep| keep == "true") =>
                {
                    Some(Decision::KeepAnnotation)
                }
                Progress::Running => Some(Decision::Running),
                Progress::NotARun => Some(Decision::NotARun),
                Progress::Finished(finished) => {
                    let at = finished.at.or(created).unwrap_or(now);
                    candidates.push(Candidate {
                        object,
                        finished: at,
                    });
                    None
                }
            };
            if let Some(decision) = decision {
                kept.push(planned(object, None, decision));
            }
        }
        candidates.sort_by(|a, b| {
            b.finished
                .cmp(&a.finished)
                .then_with(|| a.object.name_any().cmp(&b.object.name_any()))
        });
        let mut chosen: Vec<Option<Decision>> = vec![None; candidates.len()];
        for strategy in &settings.strategies {
            for index in choose(strategy, &candidates, now) {
                if let Some(slot) = chosen.get_mut(index) {
                    slot.get_or_insert_with(|| reason(strategy));
                }
            }
        }
        for (candidate, decision) in candidates.iter().zip(chosen).rev() {
            let decision = match (decision, &settings.hook) {
                (Some(decision), Some(hook)) => match hook(candidate.object) {
                    Ok(()) => decision,
                    Err(reason) => Decision::Vetoed { reason },
                },
                (Some(decision), None) => decision,
                (None, _) => Decision::Kept,
            };
            let entry = planned(candidate.object, Some(candidate.finished), decision);
            if entry.decision.prunes() {
                pruned.push(entry)
            } else {
                kept.push(entry)
            }
        }
    }
    pruned.sort_by_key(|planned| planned.finished);
    pruned.extend(kept);
    Plan { objects: pruned }
}

fn choose(strategy: &Strategy, candidates: &[Candidate<'_>], now: Timestamp) -> Vec<usize> {
    match strategy {
        Strategy::MaxCount(limit) => (*limit..candidates.len()).collect(),
        Strategy::MaxAge(age) => {
            let age = SignedDuration::try_from(*age).unwrap_or(SignedDuration::MAX);
            let oldest = now.checked_sub(age).unwrap_or(Timestamp::MIN);
            (0..candidates.len())
                .filter(|&index| candidates[index].finished < oldest)
                .collect()
        }
        Strategy::Custom { choose, .. } => choose(candidates, now),
    }
}

fn reason(strategy: &Strategy) -> Decision {
    match strategy {
        Strategy::MaxCount(limit) => Decision::MaxCount { limit: *limit },
        Strategy::MaxAge(age) => Decision::MaxAge {
            limit: format!(
                "{:#}",
                SignedDuration::try_from(*age).unwrap_or(SignedDuration::MAX)
            ),
        },
        Strategy::Custom { name, .. } => Decision::Custom {
            strategy: name.clone(),
        },
    }
}
