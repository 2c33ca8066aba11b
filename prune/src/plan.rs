//! The plan, as a pure function of the objects, the strategies and the clock: per kind and
//! namespace, the finished objects newest first, of which each strategy names those to prune;
//! running objects, objects annotated `retention.dev/keep`, objects already being deleted and
//! those a hook vetoes stay. Kept apart from the pruner so that it is shown, and tested,
//! without a cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube_retention_common::annotations::KEEP;
use kube_retention_common::limits;
use kube_retention_common::progress::Progress;
use serde::Serialize;

pub use crate::decision::Decision;
use crate::rules::FinishRules;
use crate::strategy::{FinishedObject, Group, Strategy};

/// Called before an object is pruned; an `Err` keeps it, with the reason.
pub type HookFn = Arc<dyn Fn(&DynamicObject) -> Result<(), Veto> + Send + Sync>;

/// A hook's "no", with its reason (`Err("held for audit".into())`), reported in the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Veto(pub String);

impl From<&str> for Veto {
    fn from(reason: &str) -> Self {
        Self(reason.to_owned())
    }
}

impl From<String> for Veto {
    fn from(reason: String) -> Self {
        Self(reason)
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
    pub rules: FinishRules,
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
        let (group, staying) = gather(&members, &settings.rules, now);
        kept.extend(
            staying
                .into_iter()
                .map(|(object, decision)| planned(object, None, decision)),
        );
        let mut chosen: Vec<Option<Decision>> = vec![None; group.candidates.len()];
        for strategy in &settings.strategies {
            for (index, decision) in strategy.choose(&group, now) {
                if let Some(slot) = chosen.get_mut(index) {
                    slot.get_or_insert(decision);
                }
            }
        }
        for (candidate, decision) in group.candidates.iter().zip(chosen).rev() {
            let decision = match (decision, &settings.hook) {
                (Some(decision), Some(hook)) => match hook(candidate.object) {
                    Ok(()) => decision,
                    Err(Veto(reason)) => Decision::Vetoed { reason },
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

/// Sorts one group's objects: the candidates (newest finished first, the name breaking ties),
/// every run as the controller's limits count it, and the objects that stay whatever the
/// strategies say, with why.
fn gather<'a>(
    members: &[&'a DynamicObject],
    rules: &FinishRules,
    now: Timestamp,
) -> (Group<'a>, Vec<(&'a DynamicObject, Decision)>) {
    let mut candidates = Vec::new();
    let mut runs = Vec::new();
    let mut candidate_of_run = Vec::new();
    let mut staying = Vec::new();
    for &object in members {
        let value = serde_json::to_value(object).unwrap_or_default();
        let created = object.creation_timestamp().map(|time| time.0);
        let progress = rules.progress(&value);
        let exempt = if object.metadata.deletion_timestamp.is_some() {
            Some(Decision::Deleting)
        } else if object
            .annotations()
            .get(KEEP)
            .is_some_and(|keep| keep == "true")
        {
            Some(Decision::KeepAnnotation)
        } else {
            None
        };
        let finished = match progress {
            Progress::Finished(finished) => Some(finished),
            Progress::Running | Progress::NotARun => None,
        };
        if progress != Progress::NotARun {
            // As the controller keeps a run for its limits (`state/src/groups.rs`).
            runs.push(limits::LimitedRun {
                name: object.metadata.name.as_deref().unwrap_or_default(),
                created: created.unwrap_or(now),
                outcome: finished.map(|finished| finished.outcome),
                exempt: exempt.is_some(),
            });
            candidate_of_run.push(None);
        }
        let decision = match (exempt, progress) {
            (Some(decision), _) => decision,
            (None, Progress::Running) => Decision::Running,
            (None, Progress::NotARun) => Decision::NotARun,
            (None, Progress::Finished(finished)) => {
                if let Some(slot) = candidate_of_run.last_mut() {
                    *slot = Some(candidates.len());
                }
                candidates.push(FinishedObject {
                    object,
                    outcome: finished.outcome,
                    finished: finished.at.or(created).unwrap_or(now),
                });
                continue;
            }
        };
        staying.push((object, decision));
    }
    let names: Vec<String> = candidates
        .iter()
        .map(|candidate| candidate.object.name_any())
        .collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        (candidates[b].finished, &names[a]).cmp(&(candidates[a].finished, &names[b]))
    });
    let mut rank = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        rank[old] = new;
    }
    for slot in candidate_of_run.iter_mut().flatten() {
        *slot = rank[*slot];
    }
    let candidates = order
        .into_iter()
        .map(|old| candidates[old].clone())
        .collect();
    let group = Group {
        candidates,
        runs,
        candidate_of_run,
    };
    (group, staying)
}
