//! The controller's watches, started and stopped per kind at run time: one list (streamed or in
//! pages, [`crate::initial_list`]) and then a watch for each kind (label-selected where the
//! kind's entry says so), and for kinds watched through the managed label with stragglers to
//! find, a metadata-only watch of every object without the label (an object labelled leaves the
//! one watch as it enters the other, so each object costs the API server and the controller one
//! watch, not two).
//! Lists take turns ([`crate::list_turns`]). Each watch runs in a task of its own and
//! hands the loop objects already decoded, a few ahead: a tenant's large objects are decoded
//! beside the loop that schedules deletions, not on it, and without their `managedFields`
//! ([`crate::lean`]: at the API server's ceiling decoding was the controller's main cost).
//! Those tasks are members of the supervised group `watches`: one that ends without being
//! stopped (a watch stream does not end on its own) or panics is a fault, and stops the
//! controller.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures::{SinkExt, StreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kube_retention_common::annotations::UNMANAGED_SELECTOR;
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::kinds::{Entry, KindId, Watch};
use kube_retention_runtime::supervise::Group;
use tokio::sync::Semaphore;

use crate::initial_list::Lists;
use crate::lean::{self, LeanMeta, LeanObject};
use crate::list_turns::taking_turns;
use crate::watch_backoff::watch_backoff;

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

pub struct Watches {
    client: Client,
    /// How each watch lists.
    lists: Lists,
    /// A permit per list under way.
    turns: Arc<Semaphore>,
    streams: SelectAll<BoxStream<'static, WatchEvent>>,
    running: HashMap<KindId, (Watch, Vec<Stop>)>,
    /// Lists of a kind in one namespace under way.
    relisting: HashMap<(KindId, Arc<str>), Stop>,
    /// The watches' tasks, supervised.
    tasks: Group,
}

/// Stops a watch: its task, and what it decoded ahead.
struct Stop {
    producer: tokio::task::AbortHandle,
    consumer: AbortHandle,
}

impl Watches {
    /// Watches that list as `lists` says, `list_concurrency` kinds at a time, in tasks that are
    /// members of `tasks`.
    pub fn new(client: Client, lists: Lists, list_concurrency: u32, tasks: Group) -> Self {
        let permits = usize::try_from(list_concurrency)
            .unwrap_or(usize::MAX)
            .max(1);
        Self {
            client,
            lists,
            turns: Arc::new(Semaphore::new(permits)),
            streams: stream::select_all(Vec::new()),
            running: HashMap::new(),
            relisting: HashMap::new(),
            tasks,
        }
    }

    pub fn mode(&self, kind: KindId) -> Option<&Watch> {
        self.running.get(&kind).map(|(mode, _)| mode)
    }

    pub fn is_running(&self, kind: KindId) -> bool {
        self.running.contains_key(&kind)
    }

    /// Watches `kind` as its entry says.
    pub fn start(&mut self, kind: KindId, entry: &Entry) {
        self.ensure(kind, entry, Some(entry.watch.clone()));
    }

    /// Watches `kind` in `mode` (a policy's kinds: every object), restarting the watch — a fresh
    /// list, every object judged again — when the mode changes or `relist` is set; `None` stops
    /// it.
    pub fn ensure(&mut self, kind: KindId, entry: &Entry, mode: Option<Watch>) {
        if self.running.get(&kind).map(|(running, _)| running) == mode.as_ref() {
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
        let handle = self.push(format!("replayed kind {kind:?}"), events);
        self.running.insert(kind, (mode, vec![handle]));
    }

    /// Lists `kind` afresh in its current mode.
    pub fn relist(&mut self, kind: KindId, entry: &Entry) {
        if let Some((mode, _)) = self.running.get(&kind) {
            let mode = mode.clone();
            self.stop(kind);
            self.launch(kind, entry, mode);
        }
    }

    fn launch(&mut self, kind: KindId, entry: &Entry, mode: Watch) {
        let resource = entry.resource.api_resource();
        let config = watcher::Config::default();
        let mut handles = Vec::new();
        if mode == Watch::Managed {
            let metadata: Api<LeanMeta> = Api::all_with(self.client.clone(), &resource);
            let rest = config.clone().labels(UNMANAGED_SELECTOR);
            let name = format!("{} metadata", entry.resource);
            let unlabelled = self.lists.watch(metadata, rest, name.clone());
            let unlabelled = taking_turns(unlabelled.backoff(watch_backoff()), self.turns.clone())
                .map(move |event| WatchEvent::Metadata(kind, event.map(lean::unwrapped)));
            handles.push(self.push(name, unlabelled.boxed()));
        }
        let config = match mode.selector() {
            Some(selector) => config.labels(selector),
            None => config,
        };
        let api: Api<LeanObject> = Api::all_with(self.client.clone(), &resource);
        let objects = self.lists.watch(api, config, entry.resource.to_string());
        let objects = taking_turns(objects.backoff(watch_backoff()), self.turns.clone())
            .map(move |event| WatchEvent::Object(kind, event.map(lean::unwrapped)));
        handles.push(self.push(entry.resource.to_string(), objects.boxed()));
        self.running.insert(kind, (mode, handles));
    }

    /// Lists `kind`'s objects in `namespace` afresh, once, as its watch selects them: what a
    /// RetentionPolicy's change asks for, which governs that namespace only, so that a tenant's
    /// edits list its own objects, not the cluster's. Its events come as
    /// [`WatchEvent::Relisted`], ending with the list's `InitDone`; then [`Watches::relisted`]
    /// stops it. Nothing where `kind` is not watched; a list already under way starts again.
    pub fn relist_in(&mut self, kind: KindId, entry: &Entry, namespace: Arc<str>) {
        let Some((mode, _)) = self.running.get(&kind) else {
            return;
        };
        let config = match mode.selector() {
            Some(selector) => watcher::Config::default().labels(selector),
            None => watcher::Config::default(),
        };
        self.relisted(kind, &namespace);
        let resource = entry.resource.api_resource();
        let api: Api<LeanObject> = Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let name = format!("{} in {namespace}", entry.resource);
        let events = self.lists.watch(api, config, name.clone());
        let listed = namespace.clone();
        let events = taking_turns(events.backoff(watch_backoff()), self.turns.clone())
            .scan(false, |done, event| {
                let next = (!*done).then_some(event);
                *done = *done || matches!(next, Some(Ok(Event::InitDone)));
                futures::future::ready(next)
            })
            .map(move |event| {
                WatchEvent::Relisted(kind, listed.clone(), event.map(lean::unwrapped))
            })
            // The task waits to be stopped: a watch's task that ends is a fault.
            .chain(stream::pending());
        let stop = self.push(name, events.boxed());
        self.relisting.insert((kind, namespace), stop);
    }

    /// The list of `kind` in `namespace` ended (or is to stop): its task is stopped.
    pub fn relisted(&mut self, kind: KindId, namespace: &Arc<str>) {
        if let Some(stop) = self.relisting.remove(&(kind, namespace.clone())) {
            stop.producer.abort();
            stop.consumer.abort();
        }
    }

    /// Stops the watches of `kind`, and its lists in namespaces; they deliver nothing more.
    pub fn stop(&mut self, kind: KindId) {
        let lists: Vec<Arc<str>> = self
            .relisting
            .keys()
            .filter(|(listed, _)| *listed == kind)
            .map(|(_, namespace)| namespace.clone())
            .collect();
        for namespace in lists {
            self.relisted(kind, &namespace);
        }
        for handle in self
            .running
            .remove(&kind)
            .into_iter()
            .flat_map(|(_, handles)| handles)
        {
            handle.producer.abort();
            handle.consumer.abort();
        }
    }

    /// Watches RetentionPolicies, ClusterRetentionPolicies and namespaces' metadata.
    pub fn start_policies(&mut self) {
        let config = watcher::Config::default();
        let policies = Api::<RetentionPolicy>::all(self.client.clone());
        let policies = self
            .lists
            .watch(policies, config.clone(), "RetentionPolicy".into())
            .backoff(watch_backoff())
            .map(WatchEvent::Policy);
        self.push("RetentionPolicy".into(), policies.boxed());
        let cluster = Api::<ClusterRetentionPolicy>::all(self.client.clone());
        let cluster = self
            .lists
            .watch(cluster, config.clone(), "ClusterRetentionPolicy".into())
            .backoff(watch_backoff())
            .map(WatchEvent::ClusterPolicy);
        self.push("ClusterRetentionPolicy".into(), cluster.boxed());
        let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(self.client.clone());
        let namespaces = self
            .lists
            .watch(namespaces, config, "Namespace".into())
            .backoff(watch_backoff())
            .map(WatchEvent::Namespace);
        self.push("Namespace".into(), namespaces.boxed());
    }

    /// Runs `events` in a task of its own, the member `name` of the supervised group, decoded up
    /// to [`FORWARDED`] ahead of the loop. [`Stop`] ends the task and drops what it decoded
    /// ahead: nothing of a stopped watch reaches the loop.
    fn push(&mut self, name: String, mut events: BoxStream<'static, WatchEvent>) -> Stop {
        let (consumer, consuming) = AbortHandle::new_pair();
        let (mut sender, receiver) = futures::channel::mpsc::channel(FORWARDED);
        let producer = self.tasks.spawn(name, async move {
            while let Some(event) = events.next().await {
                if sender.send(event).await.is_err() {
                    // The loop stopped reading: it stopped this watch or is shutting down.
                    return Ok(());
                }
            }
            Err("the watch stream ended")
        });
        self.streams
            .push(Abortable::new(receiver, consuming).boxed());
        Stop { producer, consumer }
    }

    /// The next event of any watch; pending (never `None`) while no watch runs.
    pub async fn next(&mut self) -> WatchEvent {
        loop {
            match self.streams.next().await {
                Some(observed) => return observed,
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// Events a watch's task decodes ahead of the loop.
const FORWARDED: usize = 16;
