//! The kinds retention policies govern, in the loop: a governed kind is watched in full (every
//! object, not only labelled ones) while a valid policy names it and the controller may list,
//! watch, patch and delete it; a policy change lists its kinds afresh so every object is judged
//! under the new settings — at most once per kind per window
//! ([`crate::relist_throttle::RelistThrottle`]) — and a
//! namespace's labels changing does the same for ClusterRetentionPolicies with a
//! `namespaceSelector`.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::{Entry, KindId, Resource, Role, Watch, group_of};

use super::Loop;
use crate::state::Action;

impl Loop {
    pub(super) fn on_namespace(
        &mut self,
        event: Result<Event<PartialObjectMeta<Namespace>>, watcher::Error>,
    ) -> Vec<Action> {
        let Ok(Event::InitApply(namespace) | Event::Apply(namespace)) = event else {
            return Vec::new();
        };
        let name = namespace.metadata.name.unwrap_or_default();
        let labels = namespace.metadata.labels.unwrap_or_default();
        let selecting = self.state.policies().iter().any(|(key, loaded)| {
            key.namespace.is_none() && !loaded.rules.namespace_selector.selects_all()
        });
        if self.state.namespace_applied(&name, labels) && selecting {
            let kinds = self.state.policies().kinds();
            self.refresh(&kinds);
        }
        Vec::new()
    }

    /// Watch modes follow the policies, and `kinds` are listed afresh: at once, or when the
    /// kind's relist window ends ([`crate::relist_throttle::RelistThrottle`]).
    pub(super) fn refresh(&mut self, kinds: &[ResourceRef]) {
        let now = tokio::time::Instant::now();
        let restarted = self.follow_policies();
        for &id in &restarted {
            self.extra.relists.listed(id, now);
        }
        for kind in kinds {
            let Some(id) = self
                .state
                .kinds()
                .find_group_kind(group_of(&kind.api_version), &kind.kind)
            else {
                continue;
            };
            if !restarted.contains(&id) && self.extra.relists.request(id, now) {
                self.watches.relist(id, &self.state.kinds()[id]);
            }
        }
    }

    /// The relists whose window ended.
    pub(super) fn relist_due(&mut self) {
        for id in self.extra.relists.due(tokio::time::Instant::now()) {
            self.watches.relist(id, &self.state.kinds()[id]);
        }
    }

    /// Watches every object of the kinds valid policies govern (where served and permitted),
    /// and puts the other kinds back as they were. Answers the kinds whose watch restarted.
    pub(super) fn follow_policies(&mut self) -> HashSet<KindId> {
        let mut wanted = HashSet::new();
        if let Some(scan) = &self.extra.scan {
            let usable: Vec<Resource> = self
                .state
                .policies()
                .kinds()
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
        match self.state.add_kind(entry) {
            Ok(id) => Some(id),
            Err(error) => {
                tracing::warn!(%error, "cannot add a policy's kind");
                None
            }
        }
    }
}
