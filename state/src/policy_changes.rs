//! What a policy change means to the state: the book loads or drops the policy, the guards arm
//! or disarm its generation, and the tracker lets go of what it governed, to be judged afresh
//! once its kinds are listed again. And what the state tells of its policies: which need their
//! expressions evaluated on an object, and what each governs now.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::KindId;

use super::{LoadedPolicy, PolicyKey, State, Summary, Unevaluated};

impl State {
    /// A policy was added or changed; answers the kinds to list afresh (before and after).
    pub fn policy_applied(&mut self, key: PolicyKey, loaded: LoadedPolicy) -> Vec<ResourceRef> {
        let mut kinds = self.policy_removed(&key);
        kinds.extend(loaded.rules.kinds.iter().cloned());
        let key: Arc<PolicyKey> = key.into();
        self.guards.arm(key.clone(), &loaded);
        self.policies.insert(key, loaded);
        kinds
    }

    /// `key`'s next generation is being compiled: until [`State::policy_applied`] loads it,
    /// the generation in force deletes nothing (held, and judged afresh under the next).
    pub fn policy_changing(&mut self, key: &PolicyKey) {
        if self.policies.get(key).is_some() {
            self.guards.hold_changing(key.clone());
        }
    }

    /// A policy is gone or about to change (`Tracker::release`); answers its kinds.
    pub fn policy_removed(&mut self, key: &PolicyKey) -> Vec<ResourceRef> {
        let Some((key, loaded)) = self.policies.remove(key) else {
            return Vec::new();
        };
        self.guards.disarm(&key);
        self.tracker.release(&key);
        loaded.rules.kinds.clone()
    }

    /// A namespace's labels; answers whether they changed (cluster policies may now differ).
    pub fn namespace_applied(&mut self, name: &str, labels: BTreeMap<String, String>) -> bool {
        let name = self.namespaces.intern(name);
        self.policies.set_namespace_labels(name, labels)
    }

    /// The valid policies that select `object` (of `kind`) and have expressions to evaluate on
    /// it; empty where the object can be judged at once.
    pub fn unevaluated(&self, kind: KindId, object: &DynamicObject) -> Unevaluated {
        self.policies.unevaluated(&self.kinds[kind], object)
    }

    /// What each policy governs now.
    pub fn summaries(&self) -> HashMap<PolicyKey, Summary> {
        self.policies.summaries(&self.tracker.runs, &self.guards)
    }

    /// A deletion `key` caused succeeded.
    pub fn policy_deleted(&mut self, key: &PolicyKey) {
        self.policies.deleted(key);
    }
}
