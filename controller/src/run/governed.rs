//! The kinds retention policies govern, in the loop: a governed kind is watched in full (every
//! object, not only labelled ones) while a valid policy names it and the controller may list,
//! watch, patch and delete it; a policy change lists its kinds afresh so every object is judged
//! under the new settings — at most once per kind per window
//! ([`kube_retention_io::relist_throttle::RelistThrottle`]) — and a
//! namespace's labels changing does the same for ClusterRetentionPolicies with a
//! `namespaceSelector`.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::{Entry, KindId, Resource, Role, Watch, group_of};

use super::Loop;
use kube_retention_state::Action;

/// What a policy change lists afresh: a kind, cluster-wide (a ClusterRetentionPolicy's, a
/// namespace's labels under a `namespaceSelector`), or a kind in the one namespace a
/// RetentionPolicy governs — what its tenant's edits cost is its own namespace's objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Relist {
    Kind(KindId),
    In(KindId, Arc<str>),
}

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
            self.refresh(&kinds, None);
        }
        Vec::new()
    }

    /// Watch modes follow the policies, and `kinds` are listed afresh — in `namespace` alone
    /// where a RetentionPolicy there changed, cluster-wide otherwise: at once, or when the
    /// kind's relist window ends ([`kube_retention_io::relist_throttle::RelistThrottle`]).
    pub(super) fn refresh(&mut self, kinds: &[ResourceRef], namespace: Option<&str>) {
        let now = tokio::time::Instant::now();
        let restarted = self.follow_policies();
        for &id in &restarted {
            self.extra.relists.listed(Relist::Kind(id), now);
        }
        for kind in kinds {
            let Some(id) = self
                .state
                .kinds()
                .find_group_kind(group_of(&kind.api_version), &kind.kind)
            else {
                continue;
            };
            let relist = match namespace {
                Some(namespace) => Relist::In(id, Arc::from(namespace)),
                None => Relist::Kind(id),
            };
            if !restarted.contains(&id) && self.extra.relists.request(relist.clone(), now) {
                self.start_relist(relist);
            }
        }
    }

    /// The relists whose window ended.
    pub(super) fn relist_due(&mut self) {
        for relist in self.extra.relists.due(tokio::time::Instant::now()) {
            self.start_relist(relist);
        }
    }

    fn start_relist(&mut self, relist: Relist) {
        match relist {
            Relist::Kind(id) => self.watches.relist(id, &self.state.kinds()[id]),
            Relist::In(id, namespace) => {
                self.watches
                    .relist_in(id, &self.state.kinds()[id], namespace)
            }
        }
    }

    /// A kind's objects in one namespace listed afresh: judged as the watch's are; the list's
    /// end counts for the blast-radius guards of that namespace's policies.
    pub(super) fn on_relisted(
        &mut self,
        kind: KindId,
        namespace: Arc<str>,
        event: Result<Event<DynamicObject>, watcher::Error>,
    ) -> Vec<Action> {
        let now = self.clock.now();
        match event {
            Ok(Event::Init) => {
                self.state.namespace_relist_started(kind, &namespace);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                self.on_applied(kind, object, now)
            }
            Ok(Event::InitDone) => {
                self.watches.relisted(kind, &namespace);
                self.state.namespace_relist_done(kind, &namespace);
                self.evaluations.list_done_in(kind, &namespace);
                let mut actions = self.settle(kind);
                actions.extend(self.state.due(now));
                actions
            }
            // The kind's watch says which went.
            Ok(Event::Delete(_)) => Vec::new(),
            Err(error) => {
                self.watch_failed(kind, &error);
                Vec::new()
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
