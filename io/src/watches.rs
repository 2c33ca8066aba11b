//! The controller's watches, started and stopped per kind at run time: one list (streamed or in
//! pages, [`crate::initial_list`]) and then a watch for each kind (label-selected where the
//! kind's entry says so), and for kinds watched through the managed label with stragglers to
//! find, a metadata-only watch of every object without the label (an object labelled leaves the
//! one watch as it enters the other, so each object costs the API server and the controller one
//! watch, not two).
//! They run in a [`WatchSet`]: in supervised tasks of the group `watches`, lists taking turns,
//! objects read as text and decoded beside the loop once there is room for them (`Read`), and
//! without their `managedFields` ([`crate::lean`]: at the API server's ceiling decoding was the
//! controller's main cost).

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kube_retention_common::annotations::UNMANAGED_SELECTOR;
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::kinds::{Entry, KindId, Watch};
use kube_retention_runtime::held::{metadata_held_bytes, object_held_bytes};
use kube_retention_runtime::object_memory::{Charge, ObjectMemory};

use crate::lean::{self, Decoded, LeanMetaText, LeanText};
use crate::namespace_lists::NamespaceLists;
use crate::watch_set::{Held, Ready, Room, WatchSet, Watching};

/// What a watch delivered: whole objects, the metadata of a kind's unlabelled objects, retention
/// policies, or namespaces (for policies' `namespaceSelector`).
pub enum WatchEvent {
    Object(KindId, Result<Event<DynamicObject>, watcher::Error>),
    Metadata(
        KindId,
        Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ),
    /// A kind's objects in one namespace, listed afresh once ([`Watches::relist_in`]): the list's
    /// events, ending with its `InitDone`.
    Relisted(
        KindId,
        Arc<str>,
        Result<Event<DynamicObject>, watcher::Error>,
    ),
    Policy(Result<Event<RetentionPolicy>, watcher::Error>),
    ClusterPolicy(Result<Event<ClusterRetentionPolicy>, watcher::Error>),
    Namespace(Result<Event<PartialObjectMeta<Namespace>>, watcher::Error>),
}

impl Held for WatchEvent {
    /// Objects and their metadata as held; policies and namespaces, the cluster's configuration
    /// (their schemas bound their size), as nothing beside their count.
    fn held(&self) -> usize {
        match self {
            WatchEvent::Object(_, Ok(event)) | WatchEvent::Relisted(_, _, Ok(event)) => match event
            {
                Event::Apply(object) | Event::InitApply(object) | Event::Delete(object) => {
                    object_held_bytes(object)
                }
                Event::Init | Event::InitDone => 0,
            },
            WatchEvent::Metadata(
                _,
                Ok(Event::Apply(meta) | Event::InitApply(meta) | Event::Delete(meta)),
            ) => std::mem::size_of::<PartialObjectMeta<DynamicObject>>()
                .saturating_add(metadata_held_bytes(&meta.metadata)),
            _ => 0,
        }
    }
}

/// What a kind's watch read: its objects as text, decoded into a [`WatchEvent`] once the loop's
/// watches have room for them.
enum Read {
    Object(KindId, Result<Event<LeanText>, watcher::Error>),
    Metadata(KindId, Result<Event<LeanMetaText>, watcher::Error>),
    Relisted(KindId, Arc<str>, Result<Event<LeanText>, watcher::Error>),
}

impl Ready for Read {
    type Event = WatchEvent;

    fn will_hold(&self) -> usize {
        match self {
            Read::Object(_, Ok(event)) | Read::Relisted(_, _, Ok(event)) => {
                lean::event_held(event, LeanText::held)
            }
            Read::Metadata(_, Ok(event)) => lean::event_held(event, LeanMetaText::held),
            Read::Object(_, Err(_)) | Read::Metadata(_, Err(_)) | Read::Relisted(_, _, Err(_)) => 0,
        }
    }

    /// Objects decoded ([`LeanText::decode`], [`unlabelled_ready`]).
    fn ready(self) -> WatchEvent {
        let decode = |event: Event<LeanText>| lean::event_map(event, LeanText::decode);
        match self {
            Read::Object(kind, event) => WatchEvent::Object(kind, event.map(decode)),
            Read::Relisted(kind, namespace, event) => {
                WatchEvent::Relisted(kind, namespace, event.map(decode))
            }
            Read::Metadata(kind, event) => WatchEvent::Metadata(kind, event.map(unlabelled_ready)),
        }
    }
}

/// An unlabelled object's metadata decoded; past the bound, its going (an object past the bound
/// leaves the state as if gone, `lean::past_bound`).
fn unlabelled_ready(event: Event<LeanMetaText>) -> Event<PartialObjectMeta<DynamicObject>> {
    let told = |meta: LeanMetaText, told: fn(_) -> Event<_>| match meta.decode() {
        Decoded::Whole(meta) => told(meta),
        Decoded::PastBound(identity) => Event::Delete(identity),
    };
    match event {
        Event::Apply(meta) => told(meta, Event::Apply),
        Event::InitApply(meta) => told(meta, Event::InitApply),
        Event::Delete(meta) => told(meta, Event::Delete),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// What one of the controller's watches is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Watched {
    /// A kind's objects, and the metadata of its unlabelled ones.
    Kind(KindId),
    /// A kind's objects in one namespace, listed once.
    Relist(KindId, Arc<str>),
    /// Policies and namespaces.
    Configuration,
}

pub struct Watches {
    client: Client,
    set: WatchSet<Watched, WatchEvent>,
    /// How each kind watched is watched.
    modes: HashMap<KindId, Watch>,
    /// Lists of a kind in one namespace under way, and what the kind's watch told since.
    namespace_lists: NamespaceLists,
}

impl Watches {
    /// Watches as `watching` says: lists, their turns, and the supervised group of their tasks.
    pub fn new(client: Client, watching: Watching) -> Self {
        Self {
            client,
            set: WatchSet::new(watching),
            modes: HashMap::new(),
            namespace_lists: NamespaceLists::default(),
        }
    }

    pub fn mode(&self, kind: KindId) -> Option<&Watch> {
        self.modes.get(&kind)
    }

    /// The room of what the controller's watches decode ahead of its loop, for the objects it
    /// fetches again on the way.
    pub fn room(&self) -> Room {
        self.set.room()
    }

    /// The process's budget of decoded objects, which every watch's events are charged to.
    pub fn memory(&self) -> &ObjectMemory {
        self.set.memory()
    }

    pub fn is_running(&self, kind: KindId) -> bool {
        self.modes.contains_key(&kind)
    }

    /// Watches `kind` as its entry says.
    pub fn start(&mut self, kind: KindId, entry: &Entry) {
        self.ensure(kind, entry, Some(entry.watch.clone()));
    }

    /// Watches `kind` in `mode` (a policy's kinds: every object), restarting the watch — a fresh
    /// list, every object judged again — when the mode changes; `None` stops it.
    pub fn ensure(&mut self, kind: KindId, entry: &Entry, mode: Option<Watch>) {
        if self.modes.get(&kind) == mode.as_ref() {
            return;
        }
        self.stop(kind);
        if let Some(mode) = mode {
            self.launch(kind, entry, mode);
        }
    }

    /// Delivers `events` as `kind`'s watch in `mode`, in place of one on the API server: the seam
    /// through which tests drive the loop with events of their own (on paused time).
    pub fn replay(&mut self, kind: KindId, mode: Watch, events: BoxStream<'static, WatchEvent>) {
        self.stop(kind);
        let name = format!("replayed kind {kind:?}");
        self.set.start(Watched::Kind(kind), name, events);
        self.modes.insert(kind, mode);
    }

    /// Lists `kind` afresh in its current mode.
    pub fn relist(&mut self, kind: KindId, entry: &Entry) {
        if let Some(mode) = self.modes.get(&kind).cloned() {
            self.stop(kind);
            self.launch(kind, entry, mode);
        }
    }

    fn launch(&mut self, kind: KindId, entry: &Entry, mode: Watch) {
        let resource = entry.resource.api_resource();
        let config = watcher::Config::default();
        if mode == Watch::Managed {
            let metadata: Api<LeanMetaText> = Api::all_with(self.client.clone(), &resource);
            let rest = config.clone().labels(UNMANAGED_SELECTOR);
            let name = format!("{} metadata", entry.resource);
            let unlabelled = self
                .set
                .objects(metadata, rest, name.clone())
                .map(move |event| Read::Metadata(kind, event));
            self.set
                .start(Watched::Kind(kind), name, unlabelled.boxed());
        }
        let config = match mode.selector() {
            Some(selector) => config.labels(selector),
            None => config,
        };
        let api: Api<LeanText> = Api::all_with(self.client.clone(), &resource);
        let name = entry.resource.to_string();
        let objects = self
            .set
            .objects(api, config, name.clone())
            .map(move |event| Read::Object(kind, event));
        self.set.start(Watched::Kind(kind), name, objects.boxed());
        self.modes.insert(kind, mode);
    }

    /// Lists `kind`'s objects in `namespace` afresh, once, as its watch selects them: what a
    /// RetentionPolicy's change asks for, which governs that namespace only, so that a tenant's
    /// edits list its own objects, not the cluster's. Its events come as
    /// [`WatchEvent::Relisted`], ending with the list's `InitDone`; then [`Watches::relisted`]
    /// stops it. Nothing where `kind` is not watched; a list already under way starts again.
    pub fn relist_in(&mut self, kind: KindId, entry: &Entry, namespace: Arc<str>) {
        let Some(mode) = self.modes.get(&kind) else {
            return;
        };
        let config = match mode.selector() {
            Some(selector) => watcher::Config::default().labels(selector),
            None => watcher::Config::default(),
        };
        self.relisted(kind, &namespace);
        self.namespace_lists.started(kind, namespace.clone());
        let resource = entry.resource.api_resource();
        let api: Api<LeanText> = Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let name = format!("{} in {namespace}", entry.resource);
        let listed = namespace.clone();
        let events = self
            .set
            .objects(api, config, name.clone())
            .scan(false, |done, event| {
                let next = (!*done).then_some(event);
                *done = *done || matches!(next, Some(Ok(Event::InitDone)));
                futures::future::ready(next)
            })
            .map(move |event| Read::Relisted(kind, listed.clone(), event))
            // The task waits to be stopped: a watch's task that ends is a fault.
            .chain(stream::pending());
        self.set
            .start(Watched::Relist(kind, namespace), name, events.boxed());
    }

    /// The list of `kind` in `namespace` ended (or is to stop): its task is stopped.
    pub fn relisted(&mut self, kind: KindId, namespace: &Arc<str>) {
        self.set.stop(&Watched::Relist(kind, namespace.clone()));
        self.namespace_lists.ended(kind, namespace);
    }

    /// Stops the watches of `kind`, and its lists in namespaces; they deliver nothing more.
    pub fn stop(&mut self, kind: KindId) {
        let namespaces: Vec<Arc<str>> = self
            .set
            .keys()
            .filter_map(|key| match key {
                Watched::Relist(listed, namespace) if *listed == kind => Some(namespace.clone()),
                _ => None,
            })
            .collect();
        for namespace in namespaces {
            self.relisted(kind, &namespace);
        }
        self.set.stop(&Watched::Kind(kind));
        self.modes.remove(&kind);
    }

    /// Watches RetentionPolicies, ClusterRetentionPolicies and namespaces' metadata.
    pub fn start_policies(&mut self) {
        let policies = Api::<RetentionPolicy>::all(self.client.clone());
        let policies = self
            .set
            .configuration(policies, "RetentionPolicy".into())
            .map(WatchEvent::Policy);
        let cluster = Api::<ClusterRetentionPolicy>::all(self.client.clone());
        let cluster = self
            .set
            .configuration(cluster, "ClusterRetentionPolicy".into())
            .map(WatchEvent::ClusterPolicy);
        let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(self.client.clone());
        let namespaces = self
            .set
            .configuration(namespaces, "Namespace".into())
            .map(WatchEvent::Namespace);
        for (name, events) in [
            ("RetentionPolicy", policies.boxed()),
            ("ClusterRetentionPolicy", cluster.boxed()),
            ("Namespace", namespaces.boxed()),
        ] {
            self.set.start(Watched::Configuration, name.into(), events);
        }
    }

    /// The next event of any watch, and what its object is charged (kept where the object is,
    /// dropped with it); pending (never `None`) while no watch runs. A list of a kind in one
    /// namespace passes on no object its kind's watch told of since the list was asked for
    /// (`passes`, `namespace_lists.rs`).
    pub async fn next(&mut self) -> (WatchEvent, Charge) {
        loop {
            let (event, charge) = self.set.next().await;
            if passes(&mut self.namespace_lists, &event) {
                return (event, charge);
            }
        }
    }
}

/// Whether `event` goes on to the loop, noting in `lists` what a kind's watch tells: false
/// only for a namespace list's version of an object its kind's watch told of since the list
/// was asked for.
pub(crate) fn passes(lists: &mut NamespaceLists, event: &WatchEvent) -> bool {
    match event {
        WatchEvent::Object(
            kind,
            Ok(Event::Apply(object) | Event::InitApply(object) | Event::Delete(object)),
        ) => {
            if let (Some(namespace), Some(name)) =
                (&object.metadata.namespace, &object.metadata.name)
            {
                lists.watched(*kind, namespace, name);
            }
            true
        }
        WatchEvent::Relisted(
            kind,
            namespace,
            Ok(Event::Apply(object) | Event::InitApply(object)),
        ) => {
            let name = object.metadata.name.as_deref().unwrap_or_default();
            !lists.superseded(*kind, namespace, name)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unlabelled object's metadata as a metadata watch reads it, with `labels` labels.
    fn unlabelled(labels: usize) -> LeanMetaText {
        let labels: serde_json::Map<String, serde_json::Value> = (0..labels)
            .map(|label| (format!("{label:x}"), serde_json::json!("")))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": "dense", "namespace": "tenant", "uid": "u", "resourceVersion": "3",
                         "annotations": {"retention.dev/ttl": "1h"}, "labels": labels},
        }))
        .unwrap()
    }

    #[test]
    fn an_unlabelled_object_past_the_bound_is_told_as_gone() {
        for event in [
            Event::Apply(unlabelled(120_000)),
            Event::InitApply(unlabelled(120_000)),
        ] {
            let Event::Delete(identity) = unlabelled_ready(event) else {
                panic!("told as gone");
            };
            assert_eq!(identity.metadata.name.as_deref(), Some("dense"));
            assert_eq!(identity.metadata.annotations, None);
        }
        let Event::Apply(within) = unlabelled_ready(Event::Apply(unlabelled(1_000))) else {
            panic!("told as it is");
        };
        assert_eq!(
            within.metadata.labels.map(|labels| labels.len()),
            Some(1_000)
        );
        assert_eq!(
            within.metadata.annotations.unwrap()["retention.dev/ttl"],
            "1h"
        );
    }

    /// A generated history: commits to four objects of one namespace, delivered in order by
    /// the kind's watch; a list of the namespace asked for after some of them were delivered,
    /// seeing at least those (and perhaps more), its items delivered in between the watch's
    /// later deliveries. What the loop is left with, taking each event passed on as the newest
    /// word on its object, is what the last commit to each object left.
    mod interleavings {
        use std::collections::BTreeMap;

        use kube::api::DynamicObject;
        use proptest::prelude::*;

        use super::*;
        use crate::namespace_lists::NamespaceLists;

        fn object(name: usize, version: usize) -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": format!("job-{name}"), "namespace": "team-a",
                             "resourceVersion": version.to_string()}
            }))
            .unwrap()
        }

        /// What each object is after `commits`, by name: its last version, or gone.
        fn after(commits: &[(usize, bool)]) -> BTreeMap<String, usize> {
            let mut state = BTreeMap::new();
            for (index, &(name, deleted)) in commits.iter().enumerate() {
                match deleted {
                    true => state.remove(&format!("job-{name}")),
                    false => state.insert(format!("job-{name}"), index + 1),
                };
            }
            state
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2_000))]
            #[test]
            fn the_loop_ends_with_what_the_last_commit_left(
                commits in prop::collection::vec((0usize..4, any::<bool>()), 0..24),
                asked in any::<prop::sample::Index>(),
                seen in any::<prop::sample::Index>(),
                arrivals in prop::collection::vec(any::<prop::sample::Index>(), 4),
            ) {
                let jobs = kube_retention_common::Registry::builtin().named("Job.batch").unwrap();
                let namespace: Arc<str> = Arc::from("team-a");
                let total = commits.len();
                // Delivered by the watch before the list is asked for; seen by the list.
                let asked = asked.index(total + 1);
                let seen = asked + seen.index(total - asked + 1);
                let items: Vec<(String, usize)> = after(&commits[..seen]).into_iter().collect();
                // Each item arrives after as many of the watch's deliveries, in order.
                let mut arrive: Vec<usize> = arrivals
                    .iter()
                    .take(items.len())
                    .map(|at| asked + at.index(total - asked + 1))
                    .collect();
                arrive.sort_unstable();
                let mut lists = NamespaceLists::default();
                let mut loop_state: BTreeMap<String, usize> = BTreeMap::new();
                let mut take = |lists: &mut NamespaceLists, event: WatchEvent| {
                    if !passes(lists, &event) {
                        return;
                    }
                    match event {
                        WatchEvent::Object(_, Ok(Event::Apply(object)))
                        | WatchEvent::Relisted(_, _, Ok(Event::InitApply(object))) => {
                            let version = object.metadata.resource_version.unwrap();
                            loop_state.insert(object.metadata.name.unwrap(), version.parse().unwrap());
                        }
                        WatchEvent::Object(_, Ok(Event::Delete(object))) => {
                            loop_state.remove(&object.metadata.name.unwrap());
                        }
                        _ => {}
                    }
                };
                let mut listed = items.iter().zip(&arrive).peekable();
                for delivered in 0..=total {
                    if delivered == asked {
                        lists.started(jobs, namespace.clone());
                    }
                    while let Some(((name, version), _)) = listed.next_if(|(_, at)| **at == delivered) {
                        let name: usize = name.trim_start_matches("job-").parse().unwrap();
                        let event = Event::InitApply(object(name, *version));
                        take(&mut lists, WatchEvent::Relisted(jobs, namespace.clone(), Ok(event)));
                    }
                    if delivered >= asked && listed.peek().is_none() {
                        lists.ended(jobs, &namespace);
                    }
                    if let Some(&(name, deleted)) = commits.get(delivered) {
                        let object = object(name, delivered + 1);
                        let event = if deleted { Event::Delete(object) } else { Event::Apply(object) };
                        take(&mut lists, WatchEvent::Object(jobs, Ok(event)));
                    }
                }
                prop_assert_eq!(loop_state, after(&commits));
            }
        }
    }
}
