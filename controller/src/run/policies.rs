//! Retention policies in the loop: their watch events loaded into the state (a policy's kinds
//! are then watched and relisted as [`super::Governed`] says: what changed is answered as
//! [`Refresh`]), and their statuses — the leader writes each policy's status when it changes,
//! through [`StatusWrites`], which retries failed writes off the loop.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::{PolicyStatus, ResourceRef};
use kube_retention_common::policies::{PolicyObject, PolicyScope};

use super::{Compiles, Core};
use crate::discovery::Scan;
use crate::policy_status;
use kube_retention_evaluator::Compiled;
use kube_retention_io::status_writes::StatusWrites;
use kube_retention_state::{Approval, LoadedPolicy, PolicyKey};

/// A policy watch's event.
type PolicyEvent<K> = Result<Event<K>, watcher::Error>;

/// Kinds a policy change lists afresh, with the namespace a RetentionPolicy governs alone.
pub type Refresh = (Vec<ResourceRef>, Option<String>);

/// The policies' watches' lists under way, and their statuses.
pub struct Policies {
    statuses: StatusWrites,
    /// RetentionPolicies seen by their watch's current (re)list.
    listing_namespaced: Option<HashSet<PolicyKey>>,
    /// ClusterRetentionPolicies seen by their watch's current (re)list.
    listing_cluster: Option<HashSet<PolicyKey>>,
    /// What was last written to each policy's status.
    written: HashMap<PolicyKey, PolicyStatus>,
}

impl Policies {
    /// The policies of `scope` seen by the current (re)list of their watch, while one runs.
    fn listing(&mut self, scope: PolicyScope) -> &mut Option<HashSet<PolicyKey>> {
        match scope {
            PolicyScope::Namespaced => &mut self.listing_namespaced,
            PolicyScope::Cluster => &mut self.listing_cluster,
        }
    }

    /// Policies whose statuses `statuses` writes.
    pub fn new(statuses: StatusWrites) -> Self {
        Self {
            statuses,
            listing_namespaced: None,
            listing_cluster: None,
            written: HashMap::new(),
        }
    }

    /// A RetentionPolicy's or ClusterRetentionPolicy's event: the state loads, changes or
    /// forgets it, or its generation goes to be compiled; answers the kinds to list afresh.
    pub fn on_event<K: PolicyObject>(
        &mut self,
        event: PolicyEvent<K>,
        core: &mut Core,
        compiles: &mut Compiles,
    ) -> Vec<Refresh> {
        let mut changed = Vec::new();
        match event {
            Ok(Event::Init) => *self.listing(K::SCOPE) = Some(HashSet::new()),
            Ok(Event::InitApply(policy) | Event::Apply(policy)) => {
                let (key, generation) = (policy.key(), policy.generation());
                if let Some(seen) = self.listing(K::SCOPE) {
                    seen.insert(key.clone());
                }
                // A status write (this controller's own) changes no generation: nothing to redo.
                // An approval changes none either, but is news to the blast-radius guard.
                let approval = Approval {
                    approved: policy.approved_generation(),
                    accepted: policy.accepted_generation(),
                };
                let loaded = core
                    .state
                    .policies()
                    .get(&key)
                    .filter(|loaded| generation.is_some() && loaded.generation == generation);
                if let Some(loaded) = loaded {
                    if loaded.approval.approved == approval.approved {
                        return changed;
                    }
                    // An approval of the generation in force: news to the guard, at once.
                    let reloaded = LoadedPolicy {
                        rules: loaded.rules.clone(),
                        errors: loaded.errors.clone(),
                        generation,
                        approval,
                    };
                    compiles.forget(&key);
                    let namespace = key.namespace.clone();
                    changed.push((core.state.policy_applied(key, reloaded), namespace));
                } else {
                    let compiling = compiles.pending(&key).is_some_and(|pending| {
                        generation.is_some()
                            && pending.generation == generation
                            && pending.approval.approved == approval.approved
                    });
                    if !compiling {
                        core.state.policy_changing(&key);
                        let source = policy.source();
                        compiles.submit(key, generation, approval, source);
                    }
                }
            }
            Ok(Event::InitDone) => {
                let seen = self.listing(K::SCOPE).take().unwrap_or_default();
                let gone: Vec<PolicyKey> = core
                    .state
                    .policies()
                    .iter()
                    .map(|(key, _)| key.clone())
                    .filter(|key| key.scope() == K::SCOPE && !seen.contains(key))
                    .collect();
                compiles.forget_unseen(|key| key.scope() != K::SCOPE || seen.contains(key));
                for key in gone {
                    self.statuses.forget(&policy_status::status_of(&key));
                    let namespace = key.namespace.clone();
                    changed.push((core.state.policy_removed(&key), namespace));
                }
            }
            Ok(Event::Delete(policy)) => {
                let key = policy.key();
                compiles.forget(&key);
                self.written.remove(&key);
                self.statuses.forget(&policy_status::status_of(&key));
                let namespace = key.namespace.clone();
                changed.push((core.state.policy_removed(&key), namespace));
            }
            Err(error) => tracing::warn!(%error, "policy watch failed; retrying with backoff"),
        }
        changed
    }

    /// A policy's generation compiled on the evaluator: loaded into the state if it is still
    /// the latest; answers its kinds, to list afresh.
    pub fn on_compiled(
        compiled: Compiled,
        core: &mut Core,
        compiles: &mut Compiles,
    ) -> Option<Refresh> {
        let (pending, key, (rules, errors)) = compiles.take(compiled)?;
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
        Some((core.state.policy_applied(key, loaded), namespace))
    }

    /// Writes each policy's status where it changed; a failed write is retried by
    /// [`StatusWrites`] until it succeeds or a newer status replaces it.
    pub fn write_statuses(&mut self, core: &Core, scan: Option<&Scan>) {
        let state = &core.state;
        let summaries = state.summaries();
        let kinds = state.kinds();
        let mut writes = Vec::new();
        let now = core.clock.now();
        for (key, loaded) in state.policies().iter() {
            let inputs = policy_status::Inputs {
                key,
                loaded,
                scan,
                summary: summaries.get(key).cloned().unwrap_or_default(),
                deletions: state.policies().deletions(key),
                kinds,
                now,
                previous: self.written.get(key),
            };
            let status = policy_status::compute(&inputs);
            if self.written.get(key) != Some(&status) {
                writes.push((key.clone(), status));
            }
        }
        for (key, status) in writes {
            match policy_status::rendered(&status) {
                Ok(value) => self.statuses.write(policy_status::status_of(&key), value),
                Err(error) => {
                    tracing::warn!(policy = %key, %error, "could not write the policy's status");
                    continue;
                }
            }
            self.written.insert(key, status);
        }
    }
}
