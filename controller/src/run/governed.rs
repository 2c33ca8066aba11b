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
use kube::api::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::{Entry, KindId, Resource, Role, Watch, group_of};
use kube_retention_io::relist_throttle::RelistThrottle;
use tokio::time::Instant;

use super::{Core, Discovered};

/// What a policy change lists afresh: a kind, cluster-wide (a ClusterRetentionPolicy's, a
/// namespace's labels under a `namespaceSelector`), or a kind in the one namespace a
/// RetentionPolicy governs — what its tenant's edits cost is its own namespace's objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Relist {
    Kind(KindId),
    In(KindId, Arc<str>),
}

/// Kinds watched in full because a policy governs them, and the relists policy changes ask for.
#[derive(Default)]
pub struct Governed {
    kinds: HashSet<KindId>,
    /// At most one per kind (in a namespace) per window.
    relists: RelistThrottle<Relist>,
}

impl Governed {
    /// A namespace's labels changed: where a ClusterRetentionPolicy selects namespaces by
    /// their labels, the kinds of every policy are listed afresh.
    pub fn on_namespace(
        &mut self,
        event: Result<Event<PartialObjectMeta<Namespace>>, watcher::Error>,
        core: &mut Core,
        discovered: &Discovered,
    ) {
        let Ok(Event::InitApply(namespace) | Event::Apply(namespace)) = event else {
            return;
        };
        let name = namespace.metadata.name.unwrap_or_default();
        let labels = namespace.metadata.labels.unwrap_or_default();
        let selecting = core.state.policies().iter().any(|(key, loaded)| {
            key.namespace.is_none() && !loaded.rules.namespace_selector.selects_all()
        });
        if core.state.namespace_applied(&name, labels) && selecting {
            let kinds = core.state.policies().kinds();
            self.refresh(&kinds, None, core, discovered);
        }
    }

    /// Watch modes follow the policies, and `kinds` are listed afresh — in `namespace` alone
    /// where a RetentionPolicy there changed, cluster-wide otherwise: at once, or when the
    /// kind's relist window ends ([`RelistThrottle`]).
    pub fn refresh(
        &mut self,
        kinds: &[ResourceRef],
        namespace: Option<&str>,
        core: &mut Core,
        discovered: &Discovered,
    ) {
        let now = Instant::now();
        let restarted = self.follow_policies(core, discovered);
        for &id in &restarted {
            self.relists.listed(Relist::Kind(id), now);
        }
        for kind in kinds {
            let Some(id) = core
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
            if !restarted.contains(&id) && self.relists.request(relist.clone(), now) {
                start_relist(relist, core);
            }
        }
    }

    /// Runs of `kind` in `namespace` were left out for room and there is room now: the kind is
    /// listed again there, at once or when its relist window ends.
    pub fn list_again(&mut self, kind: KindId, namespace: Arc<str>, core: &mut Core) {
        let relist = Relist::In(kind, namespace);
        if self.relists.request(relist.clone(), Instant::now()) {
            start_relist(relist, core);
        }
    }

    /// When the next relist that waits for its window is due.
    pub fn next_relist(&self) -> Option<Instant> {
        self.relists.next()
    }

    /// The relists whose window ended.
    pub fn relist_due(&mut self, core: &mut Core) {
        for relist in self.relists.due(Instant::now()) {
            start_relist(relist, core);
        }
    }

    /// Watches every object of the kinds valid policies govern (where served and permitted),
    /// and puts the other kinds back as they were. Answers the kinds whose watch restarted.
    pub fn follow_policies(&mut self, core: &mut Core, discovered: &Discovered) -> HashSet<KindId> {
        let mut wanted = HashSet::new();
        if let Some(scan) = discovered.scan() {
            let usable: Vec<Resource> = core
                .state
                .policies()
                .kinds()
                .iter()
                .filter_map(|kind| scan.served(group_of(&kind.api_version), &kind.kind))
                .filter(|resource| scan.missing(resource).is_empty())
                .cloned()
                .collect();
            for resource in usable {
                let entry = Entry {
                    role: Role::Object,
                    watch: Watch::ManagedOnly,
                    ..Entry::plain(resource)
                };
                match core.kind_for(entry) {
                    Ok(id) => {
                        wanted.insert(id);
                    }
                    Err(error) => tracing::warn!(%error, "cannot add a policy's kind"),
                }
            }
        }
        let mut restarted = HashSet::new();
        let all: Vec<KindId> = wanted.union(&self.kinds).copied().collect();
        for id in all {
            let mode = if wanted.contains(&id) {
                Some(Watch::All)
            } else if core.served.contains(&id) || discovered.watches(id) {
                Some(core.state.kinds()[id].watch.clone())
            } else {
                None
            };
            if core.watches.mode(id) != mode.as_ref() {
                let stopping = mode.is_none();
                core.watches.ensure(id, &core.state.kinds()[id], mode);
                if stopping {
                    core.state.forget_kind(id);
                }
                restarted.insert(id);
            }
        }
        self.kinds = wanted;
        restarted
    }
}

fn start_relist(relist: Relist, core: &mut Core) {
    match relist {
        Relist::Kind(id) => core.watches.relist(id, &core.state.kinds()[id]),
        Relist::In(id, namespace) => core
            .watches
            .relist_in(id, &core.state.kinds()[id], namespace),
    }
}
