//! Retention policies in the loop: a policy's kinds are watched in full (every object, not only
//! labelled ones) while a valid policy names them and the controller may list, watch, patch and
//! delete them; a policy change lists its kinds afresh so every object is judged under the new
//! settings; a namespace's labels changing does the same for ClusterRetentionPolicies with a
//! `namespaceSelector`. The leader writes each policy's status when it changes, through
//! [`StatusWrites`], which retries failed writes off the loop.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::{
    ClusterRetentionPolicy, PolicyStatus, ResourceRef, RetentionPolicy,
};
use kube_retention_common::kinds::{Entry, KindId, Resource, Role, Watch, group_of};
use kube_retention_common::policies::Rules;
use serde_json::Value;

use super::{Discovered, Loop};
use crate::discovery::Scan;
use crate::policy_status;
use crate::policy_status::writes::StatusWrites;
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

    pub(super) fn on_namespace(
        &mut self,
        event: Observed<kube::api::PartialObjectMeta<k8s_openapi::api::core::v1::Namespace>>,
    ) -> Vec<Action> {
        let Ok(Event::InitApply(namespace) | Event::Apply(namespace)) = event else {
            return Vec::new();
        };
        let name = namespace.metadata.name.unwrap_or_default();
        let labels = namespace.metadata.labels.unwrap_or_default();
        let selecting = self.state.policies().any(|(key, loaded)| {
            key.namespace.is_none() && !loaded.rules.namespace_selector.requirements.is_empty()
        });
        if self.state.namespace_applied(&name, labels) && selecting {
            let kinds = self.state.policy_kinds();
            self.refresh(&kinds);
        }
        Vec::new()
    }

    /// Watch modes follow the policies, and `kinds` are listed afresh.
    fn refresh(&mut self, kinds: &[ResourceRef]) {
        let restarted = self.follow_policies();
        for kind in kinds {
            let Some(id) = self
                .state
                .kinds()
                .find_group_kind(group_of(&kind.api_version), &kind.kind)
            else {
                continue;
            };
            if !restarted.contains(&id) {
                self.watches.relist(id, &self.state.kinds()[id]);
            }
        }
    }

    /// Watches every object of the kinds valid policies govern (where served and permitted),
    /// and puts the other kinds back as they were. Answers the kinds whose watch restarted.
    pub(super) fn follow_policies(&mut self) -> HashSet<KindId> {
        let mut wanted = HashSet::new();
        if let Some(scan) = &self.extra.scan {
            let usable: Vec<Resource> = self
                .state
                .policy_kinds()
                .iter()
                .filter_map(|kind| scan.served(group_of(&kind.api_version), &kind.kind))
                .filter(|resource| scan.missing(resource).is_empty())
                .cloned()
                .collect();
            for resource in usable {
                if let Some(id) = self.kind_for(resource) {
                    wanted.insert(id);
                }
            }
        }
        let mut restarted = HashSet::new();
        let all: Vec<KindId> = wanted.union(&self.extra.governed).copied().collect();
        for id in all {
            let mode = if wanted.contains(&id) {
                Some(Watch::All)
            } else if self.served.contains(&id) || self.extra.discovered.watching.contains(&id) {
                Some(self.state.kinds()[id].watch.clone())
            } else {
                None
            };
            if self.watches.mode(id) != mode.as_ref() {
                let stopping = mode.is_none();
                self.watches.ensure(id, &self.state.kinds()[id], mode);
                if stopping {
                    self.state.forget_kind(id);
                }
                restarted.insert(id);
            }
        }
        self.extra.governed = wanted;
        restarted
    }

    /// The registry's id for a served kind, adding it as a plain object kind if new.
    fn kind_for(&mut self, resource: Resource) -> Option<KindId> {
        if let Some(id) = self
            .state
            .kinds()
            .find_group_kind(&resource.group, &resource.kind)
        {
            return Some(id);
        }
        let entry = Entry {
            role: Role::Object,
            watch: Watch::ManagedOnly,
            ..Entry::plain(resource)
        };
        match self.state.add_kind(entry.clone()) {
            Ok(id) => {
                self.executor.add_kind(entry);
                Some(id)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot add a policy's kind");
                None
            }
        }
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
