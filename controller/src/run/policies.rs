//! Retention policies in the loop: their watch events loaded into the state (a policy's kinds
//! are then watched and relisted as [`super::governed`] says), and their statuses — the leader
//! writes each policy's status when it changes, through [`StatusWrites`], which retries failed
//! writes off the loop.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::{PolicyStatus, ResourceRef};
use kube_retention_common::kinds::KindId;
use kube_retention_common::policies::{PolicyObject, PolicyScope};

use super::governed::Relist;
use super::{Discovered, Loop};
use crate::discovery::Scan;
use crate::policy_status;
use kube_retention_evaluator::Compiled;
use kube_retention_io::relist_throttle::RelistThrottle;
use kube_retention_io::status_writes::StatusWrites;
use kube_retention_state::{Action, Approval, LoadedPolicy, PolicyKey};

/// The loop's state beyond the configured kinds.
pub struct Extra {
    /// Writes policies' statuses.
    pub statuses: StatusWrites,
    pub(super) discovered: Discovered,
    /// The latest scan's served kinds and the controller's rules.
    pub(super) scan: Option<Scan>,
    /// Kinds watched in full because a policy governs them.
    pub(super) governed: HashSet<KindId>,
    /// RetentionPolicies seen by their watch's current (re)list.
    listing_namespaced: Option<HashSet<PolicyKey>>,
    /// ClusterRetentionPolicies seen by their watch's current (re)list.
    listing_cluster: Option<HashSet<PolicyKey>>,
    pub(super) written: HashMap<PolicyKey, PolicyStatus>,
    /// Relists asked for by policy changes, at most one per kind (in a namespace) per window.
    pub(super) relists: RelistThrottle<Relist>,
}

impl Extra {
    /// The policies of `scope` seen by the current (re)list of their watch, while one runs.
    fn listing(&mut self, scope: PolicyScope) -> &mut Option<HashSet<PolicyKey>> {
        match scope {
            PolicyScope::Namespaced => &mut self.listing_namespaced,
            PolicyScope::Cluster => &mut self.listing_cluster,
        }
    }

    pub fn new(statuses: StatusWrites) -> Self {
        Self {
            statuses,
            discovered: Discovered::default(),
            scan: None,
            governed: HashSet::new(),
            listing_namespaced: None,
            listing_cluster: None,
            written: HashMap::new(),
            relists: RelistThrottle::default(),
        }
    }
}

/// A policy watch's event.
type PolicyEvent<K> = Result<Event<K>, watcher::Error>;

impl Loop {
    /// A RetentionPolicy's or ClusterRetentionPolicy's event: the state loads, changes or
    /// forgets it, and the kinds it governs are relisted.
    pub(super) fn on_policy<K: PolicyObject>(&mut self, event: PolicyEvent<K>) -> Vec<Action> {
        // The kinds to list afresh, with the namespace a RetentionPolicy governs alone.
        let mut changed: Vec<(Vec<ResourceRef>, Option<String>)> = Vec::new();
        match event {
            Ok(Event::Init) => *self.extra.listing(K::SCOPE) = Some(HashSet::new()),
            Ok(Event::InitApply(policy) | Event::Apply(policy)) => {
                let (key, generation) = (policy.key(), policy.generation());
                if let Some(seen) = self.extra.listing(K::SCOPE) {
                    seen.insert(key.clone());
                }
                // A status write (this controller's own) changes no generation: nothing to redo.
                // An approval changes none either, but is news to the blast-radius guard.
                let approval = Approval {
                    approved: policy.approved_generation(),
                    accepted: policy.accepted_generation(),
                };
                let loaded = self
                    .state
                    .policies()
                    .get(&key)
                    .filter(|loaded| generation.is_some() && loaded.generation == generation);
                if let Some(loaded) = loaded {
                    if loaded.approval.approved == approval.approved {
                        return Vec::new();
                    }
                    // An approval of the generation in force: news to the guard, at once.
                    let reloaded = LoadedPolicy {
                        rules: loaded.rules.clone(),
                        errors: loaded.errors.clone(),
                        generation,
                        approval,
                    };
                    self.evaluations.compiles.forget(&key);
                    let namespace = key.namespace.clone();
                    changed.push((self.state.policy_applied(key, reloaded), namespace));
                } else {
                    let compiling =
                        self.evaluations
                            .compiles
                            .pending(&key)
                            .is_some_and(|pending| {
                                generation.is_some()
                                    && pending.generation == generation
                                    && pending.approval.approved == approval.approved
                            });
                    if !compiling {
                        self.state.policy_changing(&key);
                        let source = policy.source();
                        self.evaluations
                            .compiles
                            .submit(key, generation, approval, source);
                    }
                }
            }
            Ok(Event::InitDone) => {
                let seen = self.extra.listing(K::SCOPE).take().unwrap_or_default();
                let gone: Vec<PolicyKey> = self
                    .state
                    .policies()
                    .iter()
                    .map(|(key, _)| key.clone())
                    .filter(|key| key.scope() == K::SCOPE && !seen.contains(key))
                    .collect();
                self.evaluations
                    .compiles
                    .forget_unseen(|key| key.scope() != K::SCOPE || seen.contains(key));
                for key in gone {
                    self.extra.statuses.forget(&policy_status::status_of(&key));
                    let namespace = key.namespace.clone();
                    changed.push((self.state.policy_removed(&key), namespace));
                }
            }
            Ok(Event::Delete(policy)) => {
                let key = policy.key();
                self.evaluations.compiles.forget(&key);
                self.extra.written.remove(&key);
                self.extra.statuses.forget(&policy_status::status_of(&key));
                let namespace = key.namespace.clone();
                changed.push((self.state.policy_removed(&key), namespace));
            }
            Err(error) => tracing::warn!(%error, "policy watch failed; retrying with backoff"),
        }
        for (kinds, namespace) in changed {
            if !kinds.is_empty() {
                self.refresh(&kinds, namespace.as_deref());
            }
        }
        Vec::new()
    }

    /// A policy's generation compiled on the evaluator: loaded into the state if it is still
    /// the latest, and its kinds listed afresh.
    pub(super) fn on_compiled(&mut self, compiled: Compiled) -> Vec<Action> {
        let Some((pending, key, (rules, errors))) = self.evaluations.compiles.take(compiled) else {
            return Vec::new();
        };
        if !errors.is_empty() {
            tracing::warn!(policy = %key, errors = errors.len(), "policy is invalid; ignored until fixed");
        }
        let loaded = LoadedPolicy {
            rules: std::sync::Arc::new(rules),
            errors,
            generation: pending.generation,
            approval: pending.approval,
        };
        let namespace = key.namespace.clone();
        let kinds = self.state.policy_applied(key, loaded);
        if !kinds.is_empty() {
            self.refresh(&kinds, namespace.as_deref());
        }
        Vec::new()
    }

    /// Writes each policy's status where it changed (the leader only); a failed write is
    /// retried by [`StatusWrites`] until it succeeds or a newer status replaces it.
    pub(super) fn write_policy_statuses(&mut self) {
        if !*self.leadership.borrow() {
            return;
        }
        let summaries = self.state.summaries();
        let kinds = self.state.kinds();
        let mut writes = Vec::new();
        let now = self.clock.now();
        for (key, loaded) in self.state.policies().iter() {
            let inputs = policy_status::Inputs {
                key,
                loaded,
                scan: self.extra.scan.as_ref(),
                summary: summaries.get(key).cloned().unwrap_or_default(),
                deletions: self.state.policies().deletions(key),
                kinds,
                now,
                previous: self.extra.written.get(key),
            };
            let status = policy_status::compute(&inputs);
            if self.extra.written.get(key) != Some(&status) {
                writes.push((key.clone(), status));
            }
        }
        for (key, status) in writes {
            let of = policy_status::status_of(&key);
            self.extra
                .statuses
                .write(of, policy_status::rendered(&status));
            self.extra.written.insert(key, status);
        }
    }
}
