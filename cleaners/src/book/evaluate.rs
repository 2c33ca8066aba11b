//! One evaluation of a Cleaner: its conditions compiled first, once a spec ([`super::compile`]);
//! its targets resolved from the objects watched in its namespace ([`Book::prepare`]), the
//! conditions judged over them — on the evaluator, a step at a time, or at once in tests — and
//! either the group to clean or the time to look again ([`Book::conclude`]).

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube_retention_common::cleaner::{ERROR_RETRY, Verdict};

use super::{
    Book, Clean, CleanerKey, CompileRequest, Doomed, Evaluation, KindState, Scope, ScopeState,
};
use crate::judging::Pending;
use crate::status::Problem;
use crate::targets::{describe, kind_of};

/// An evaluation prepared: decided already, its conditions to judge, or its spec to compile
/// first (evaluated again once compiled).
pub enum Prepared {
    Decided(Evaluation),
    Conditions(Pending),
    Compile(CompileRequest),
}

impl Book {
    /// Resolves the Cleaner `key`'s targets at `now`: its spec to compile off the loop where
    /// that was not asked for yet; the evaluation where that decides it (its `ttl` not passed,
    /// no conditions, a target unreadable, the spec invalid), else its conditions to judge off
    /// the loop ([`Book::conclude`] takes their verdict). `None` when it is gone, its spec
    /// compiling, or its target kinds not known yet.
    pub fn prepare(&mut self, key: &CleanerKey, now: Timestamp) -> Option<Prepared> {
        let judge = match self.judge_or_request(key) {
            Ok(judge) => judge,
            Err(request) => return request.map(|request| Prepared::Compile(*request)),
        };
        let tracked = self.cleaners.get(key)?;
        let mut resolved = Vec::new();
        let mut targets: Vec<(String, Vec<Arc<DynamicObject>>)> = Vec::new();
        let mut objects = Vec::new();
        let mut problem = None;
        for target in &tracked.spec.targets {
            let kind = kind_of(&target.reference);
            let unavailable = match self.kinds.get(&kind) {
                Some(KindState::Served(_)) => {
                    match self.scopes.get(&Scope::new(kind.clone(), &key.namespace)) {
                        Some(ScopeState::Watching(objects)) => Ok(objects),
                        Some(ScopeState::Unavailable(reason)) => Err(reason),
                        None => return None,
                    }
                }
                Some(KindState::Unavailable(reason)) => Err(reason),
                Some(KindState::Resolving) | None => return None,
            };
            let kind_objects = match unavailable {
                Ok(kind_objects) => kind_objects,
                Err(reason) => {
                    problem.get_or_insert(Problem::TargetKind {
                        kind: format!("{}/{}", kind.api_version(), kind.kind),
                        reason: reason.clone(),
                    });
                    continue;
                }
            };
            let mut items = Vec::new();
            for object in kind_objects.selected(&target.reference) {
                let name = object.name_any();
                resolved.push(describe(&kind_objects.resource, &name));
                if target.include_when_evaluating {
                    items.push(object.clone());
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
                targets.push((target.name.clone(), items));
            }
        }
        resolved.sort();
        let clean = Clean {
            cleaner: key.clone(),
            uid: tracked.uid.clone(),
            generation: tracked.generation,
            approved: tracked.generation.is_some() && tracked.approved == tracked.generation,
            objects,
            release: tracked
                .spec
                .helm
                .as_ref()
                .filter(|helm| helm.delete)
                .map(|helm| helm.release.clone()),
            sink: tracked.spec.cloud_event_sink.clone(),
        };
        let started = match (&judge, problem) {
            (Err(errors), _) => {
                let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Err(Problem::InvalidSpec(errors.join("; ")))
            }
            (Ok(_), Some(problem)) => Err(problem),
            (Ok(judge), None) => Ok((judge.clone(), judge.start(tracked.created, now))),
        };
        let verdict = match started {
            Err(problem) => Err(problem),
            Ok((_, Ok(verdict))) => Ok(verdict),
            Ok((judge, Err(judging))) => {
                self.seq += 1;
                let seq = self.seq;
                if let Some(tracked) = self.cleaners.get_mut(key) {
                    tracked.evaluating = Some(seq);
                }
                return Some(Prepared::Conditions(Pending {
                    key: key.clone(),
                    seq,
                    judge,
                    judging,
                    targets,
                    resolved,
                    clean,
                }));
            }
        };
        let evaluation = self.decided(key, verdict, resolved, clean, now);
        Some(Prepared::Decided(evaluation))
    }

    /// The verdict on `pending`'s conditions: the evaluation, unless the Cleaner went. Where it
    /// was prepared again meanwhile (its targets changed), the later evaluation decides: this
    /// verdict cleans nothing and schedules nothing, and is answered only to be reported — so a
    /// Cleaner whose targets change faster than it is judged still says what its conditions
    /// said — unless it was to clean, which only a verdict on the latest targets may.
    pub fn conclude(
        &mut self,
        pending: Pending,
        verdict: Result<Verdict, Problem>,
        now: Timestamp,
    ) -> Option<Evaluation> {
        let tracked = self.cleaners.get_mut(&pending.key)?;
        if tracked.evaluating != Some(pending.seq) {
            if matches!(verdict, Ok(Verdict::Clean)) {
                return None;
            }
            return Some(Evaluation {
                verdict,
                resolved: pending.resolved,
                clean: None,
            });
        }
        tracked.evaluating = None;
        let Pending {
            key,
            resolved,
            clean,
            ..
        } = pending;
        Some(self.decided(&key, verdict, resolved, clean, now))
    }

    /// The evaluation `seq` of `key` will not be concluded (its verdict came to a replica that
    /// no longer leads): `key` is evaluated again at the next chance.
    pub fn abandon(&mut self, key: &CleanerKey, seq: u64) {
        if let Some(tracked) = self.cleaners.get_mut(key)
            && tracked.evaluating == Some(seq)
        {
            tracked.evaluating = None;
            self.woken.insert(key.clone());
        }
    }

    /// Whether `seq` is the latest evaluation prepared of `key`, and under way.
    pub fn evaluating(&self, key: &CleanerKey, seq: u64) -> bool {
        self.cleaners
            .get(key)
            .is_some_and(|tracked| tracked.evaluating == Some(seq))
    }

    fn decided(
        &mut self,
        key: &CleanerKey,
        verdict: Result<Verdict, Problem>,
        resolved: Vec<String>,
        clean: Clean,
        now: Timestamp,
    ) -> Evaluation {
        let clean = matches!(verdict, Ok(Verdict::Clean)).then_some(clean);
        let next = match &verdict {
            Ok(verdict) => verdict.next(),
            Err(Problem::InvalidSpec(_)) => None,
            Err(_) => Some(retry_after_error(now)),
        };
        self.set_next(key, next);
        if let Some(tracked) = self.cleaners.get_mut(key) {
            tracked.acting = clean.is_some();
        }
        Evaluation {
            verdict,
            resolved,
            clean,
        }
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

    /// The blast-radius guard held a clean: the Cleaner waits, unscheduled, for its approval
    /// (or a new spec, or a change to its targets) to wake it.
    pub fn clean_awaits_approval(&mut self, key: &CleanerKey) {
        if let Some(tracked) = self.cleaners.get_mut(key) {
            tracked.acting = false;
        }
        self.set_next(key, None);
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
