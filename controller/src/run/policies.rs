//! Retention policies in the loop: their watch events loaded into the state (a policy's kinds
//! are then watched and relisted as [`super::governed`] says), and their statuses — the leader
//! writes each policy's status when it changes, through [`StatusWrites`], which retries failed
//! writes off the loop.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::{ClusterRetentionPolicy, PolicyStatus, RetentionPolicy};
use kube_retention_common::kinds::KindId;
use kube_retention_common::policies::Rules;
use serde_json::Value;

use super::{Discovered, Loop};
use crate::discovery::Scan;
use crate::policy_status;
use crate::policy_status::writes::StatusWrites;
use crate::relist_throttle::RelistThrottle;
use crate::state::{Action, LoadedPolicy, PolicyKey};

/// The loop's state beyond the configured kinds.
pub struct Extra {
    /// Writes policies' statuses.
    pub statuses: StatusWrites,
    pub(super) discovered: Discovered,
    /// The latest scan's served kinds and the controller's rules.
    pub(super) scan: Option<Scan>,
    /// Kinds watched in full because a policy governs them.
    pub(super) governed: HashSet<KindId>,
    /// Policies seen by the current (re)list of each scope (namespaced, cluster).
    listing: [Option<HashSet<PolicyKey>>; 2],
    pub(super) written: HashMap<PolicyKey, PolicyStatus>,
    /// Relists asked for by policy changes, at most one per kind per window.
    pub(super) relists: RelistThrottle,
}

impl Extra {
    pub fn new(statuses: StatusWrites) -> Self {
        Self {
            statuses,
            discovered: Discovered::default(),
            scan: None,
            governed: HashSet::new(),
            listing: [None, None],
            written: HashMap::new(),
            relists: RelistThrottle::default(),
        }
    }
}

type Observed<K> = Result<Event<K>, watcher::Error>;

impl Loop {
    pub(super) fn on_policy(&mut self, event: Observed<RetentionPolicy>) -> Vec<Action> {
        self.on_any_policy(0, event, |policy| {
            let key = PolicyKey {
                namespace: policy.metadata.namespace.clone(),
                name: policy.metadata.name.clone().unwrap_or_default(),
            };
            (key, policy.metadata.generation, &policy.spec.rules, None)
        })
    }

    pub(super) fn on_cluster_policy(
        &mut self,
        event: Observed<ClusterRetentionPolicy>,
    ) -> Vec<Action> {
        self.on_any_policy(1, event, |policy| {
            let key = PolicyKey {
                namespace: None,
                name: policy.metadata.name.clone().unwrap_or_default(),
            };
            let selector = policy
                .spec
                .namespace_selector
                .as_ref()
                .and_then(|selector| serde_json::to_value(selector).ok());
            (
                key,
                policy.metadata.generation,
                &policy.spec.rules,
                selector,
            )
        })
    }

    fn on_any_policy<K>(
        &mut self,
        scope: usize,
        event: Observed<K>,
        read: impl Fn(
            &K,
        ) -> (
            PolicyKey,
            Option<i64>,
            &kube_retention_common::api::PolicyRules,
            Option<Value>,
        ),
    ) -> Vec<Action> {
        let mut kinds = Vec::new();
        match event {
            Ok(Event::Init) => self.extra.listing[scope] = Some(HashSet::new()),
            Ok(Event::InitApply(policy) | Event::Apply(policy)) => {
                let (key, generation, spec, selector) = read(&policy);
                if let Some(seen) = &mut self.extra.listing[scope] {
                    seen.insert(key.clone());
                }
                // A status write (this controller's own) changes no generation: nothing to redo.
                let unchanged = self
                    .state
                    .policy(&key)
                    .is_some_and(|loaded| generation.is_some() && loaded.generation == generation);
                if unchanged {
                    return Vec::new();
                }
                let (rules, errors) = Rules::read(spec, selector.as_ref());
                if !errors.is_empty() {
                    tracing::warn!(policy = %key, errors = errors.len(), "policy is invalid; ignored until fixed");
                }
                let loaded = LoadedPolicy {
                    rules: std::sync::Arc::new(rules),
                    errors,
                    generation,
                };
                kinds = self.state.policy_applied(key, loaded);
            }
            Ok(Event::InitDone) => {
                let seen = self.extra.listing[scope].take().unwrap_or_default();
                let gone: Vec<PolicyKey> = self
                    .state
                    .policies()
                    .map(|(key, _)| key.clone())
                    .filter(|key| key.namespace.is_some() == (scope == 0) && !seen.contains(key))
                    .collect();
                for key in gone {
                    self.extra.statuses.forget(&key);
                    kinds.extend(self.state.policy_removed(&key));
                }
            }
            Ok(Event::Delete(policy)) => {
                let (key, ..) = read(&policy);
                self.extra.written.remove(&key);
                self.extra.statuses.forget(&key);
                kinds = self.state.policy_removed(&key);
            }
            Err(error) => tracing::warn!(%error, "policy watch failed; retrying with backoff"),
        }
        if !kinds.is_empty() {
            self.refresh(&kinds);
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
        for (key, loaded) in self.state.policies() {
            let inputs = policy_status::Inputs {
                loaded,
                scan: self.extra.scan.as_ref(),
                summary: summaries.get(key).cloned().unwrap_or_default(),
                deletions: self.state.deletions(key),
                kinds,
                previous: self.extra.written.get(key),
            };
            let status = policy_status::compute(&inputs);
            if self.extra.written.get(key) != Some(&status) {
                writes.push((key.clone(), status));
            }
        }
        for (key, status) in writes {
            self.extra.written.insert(key.clone(), status.clone());
            self.extra.statuses.write(key, status);
        }
    }
}
