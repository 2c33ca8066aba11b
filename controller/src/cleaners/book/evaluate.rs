//! One evaluation of a Cleaner: its targets resolved from the kinds' objects, the conditions
//! judged over them, and either the group to clean or the time to look again.

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube_retention_common::cel::Variables;
use kube_retention_common::cleaner::{ERROR_RETRY, Verdict};
use serde_json::{Value, json};

use super::{Book, Clean, CleanerKey, Doomed, Evaluation, KindState};
use crate::cleaners::status::Problem;
use crate::cleaners::targets::{describe, kind_of};

impl Book {
    /// Evaluates the Cleaner `key` at `now`; `None` when it is gone.
    pub fn evaluate(&mut self, key: &CleanerKey, now: Timestamp) -> Option<Evaluation> {
        let tracked = self.cleaners.get(key)?;
        let mut resolved = Vec::new();
        let mut values: Vec<(&str, Value)> = Vec::new();
        let mut objects = Vec::new();
        let mut problem = None;
        for target in &tracked.spec.targets {
            let kind = kind_of(&target.reference);
            let kind_objects = match self.kinds.get(&kind) {
                Some(KindState::Served(kind_objects)) => kind_objects,
                Some(KindState::Unavailable(reason)) => {
                    problem.get_or_insert(Problem::TargetKind {
                        kind: format!("{}/{}", kind.api_version(), kind.kind),
                        reason: reason.clone(),
                    });
                    continue;
                }
                Some(KindState::Resolving) | None => return None,
            };
            let mut items = Vec::new();
            for object in kind_objects.selected(&key.namespace, &target.reference) {
                let name = object.name_any();
                resolved.push(describe(&kind_objects.resource, &name));
                if target.include_when_evaluating {
                    items.push(serde_json::to_value(object.as_ref()).unwrap_or(Value::Null));
                }
                if target.delete {
                    objects.push(Doomed {
                        resource: kind_objects.resource.clone(),
                        namespace: key.namespace.clone(),
                        name,
                        uid: object.uid().unwrap_or_default(),
                    });
                }
            }
            if target.include_when_evaluating {
                values.push((target.name.as_str(), json!({ "items": items })));
            }
        }
        let verdict = match (&tracked.judge, problem) {
            (Err(errors), _) => {
                let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Err(Problem::InvalidSpec(errors.join("; ")))
            }
            (Ok(_), Some(problem)) => Err(problem),
            (Ok(judge), None) => {
                let named = values.iter().map(|(name, value)| (*name, value));
                match Variables::new(named) {
                    Ok(variables) => Ok(judge.judge(tracked.created, now, &variables)),
                    Err(reason) => Err(Problem::Values(reason)),
                }
            }
        };
        let clean = matches!(verdict, Ok(Verdict::Clean)).then(|| Clean {
            cleaner: key.clone(),
            uid: tracked.uid.clone(),
            objects,
            release: tracked
                .spec
                .helm
                .as_ref()
                .filter(|helm| helm.delete)
                .map(|helm| helm.release.clone()),
            sink: tracked.spec.cloud_event_sink.clone(),
        });
        let next = match &verdict {
            Ok(verdict) => verdict.next(),
            Err(Problem::InvalidSpec(_)) => None,
            Err(_) => Some(retry_after_error(now)),
        };
        self.set_next(key, next);
        if let Some(tracked) = self.cleaners.get_mut(key) {
            tracked.acting = clean.is_some();
        }
        resolved.sort();
        Some(Evaluation {
            verdict,
            resolved,
            clean,
        })
    }

    /// A clean ended. A failed one is tried again soon; after a successful one the Cleaner is
    /// never evaluated again — the deletions it caused must not clean the group a second time —
    /// and its own deletion takes it out of the book.
    pub fn clean_done(&mut self, key: &CleanerKey, succeeded: bool, now: Timestamp) {
        if succeeded {
            self.woken.remove(key);
            return;
        }
        if let Some(tracked) = self.cleaners.get_mut(key) {
            tracked.acting = false;
        }
        self.set_next(key, Some(retry_after_error(now)));
    }

    fn set_next(&mut self, key: &CleanerKey, next: Option<Timestamp>) {
        let Some(tracked) = self.cleaners.get_mut(key) else {
            return;
        };
        if let Some(old) = tracked.next.take() {
            self.schedule.remove(&(old, key.clone()));
        }
        if let Some(next) = next {
            tracked.next = Some(next);
            self.schedule.insert((next, key.clone()));
        }
    }
}

fn retry_after_error(now: Timestamp) -> Timestamp {
    let wait = SignedDuration::try_from(ERROR_RETRY).unwrap_or(SignedDuration::MAX);
    now.saturating_add(wait).unwrap_or(Timestamp::MAX)
}
