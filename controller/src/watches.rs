//! The controller's watches, started and stopped per kind at run time: one paged LIST and then a
//! watch for each kind (label-selected where the kind's entry says so), and for kinds watched
//! through the managed label with stragglers to find, a metadata-only watch of every object
//! without the label (an object labelled leaves the one watch as it enters the other, so each
//! object costs the API server and the controller one watch, not two).
//! Lists take turns (`--list-concurrency`): the memory a list holds is a page per kind listing,
//! and 100 kinds listed at once would hold 100 pages. Each watch runs in a task of its own and
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
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::lean::{self, LeanMeta, LeanObject};
use crate::watch_backoff::watch_backoff;

/// What a watch delivered: whole objects, the metadata of a kind's unlabelled objects, retention
/// policies, or namespaces (for policies' `namespaceSelector`).
pub enum WatchEvent {
    Object(KindId, Result<Event<DynamicObject>, watcher::Error>),
    Metadata(
        KindId,
        Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ),
    Policy(Result<Event<RetentionPolicy>, watcher::Error>),
    ClusterPolicy(Result<Event<ClusterRetentionPolicy>, watcher::Error>),
    Namespace(Result<Event<PartialObjectMeta<Namespace>>, watcher::Error>),
}

pub struct Watches {
    client: Client,
    page_size: u32,
    /// A permit per list under way.
    lists: Arc<Semaphore>,
    streams: SelectAll<BoxStream<'static, WatchEvent>>,
    running: HashMap<KindId, (Watch, Vec<Stop>)>,
    /// The watches' tasks, supervised.
    tasks: Group,
}

/// Stops a watch: its task, and what it decoded ahead.
struct Stop {
    producer: tokio::task::AbortHandle,
    consumer: AbortHandle,
}

impl Watches {
    /// Watches whose tasks are members of `tasks`.
    pub fn new(client: Client, page_size: u32, list_concurrency: u32, tasks: Group) -> Self {
        let permits = usize::try_from(list_concurrency)
            .unwrap_or(usize::MAX)
            .max(1);
        Self {
            client,
            page_size,
            lists: Arc::new(Semaphore::new(permits)),
            streams: stream::select_all(Vec::new()),
            running: HashMap::new(),
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
        let config = watcher::Config::default().page_size(self.page_size);
        let mut handles = Vec::new();
        if mode == Watch::Managed {
            let metadata: Api<LeanMeta> = Api::all_with(self.client.clone(), &resource);
            let rest = config.clone().labels(UNMANAGED_SELECTOR);
            let unlabelled = watcher::watcher(metadata, rest).backoff(watch_backoff());
            let unlabelled = taking_turns(unlabelled, self.lists.clone())
                .map(move |event| WatchEvent::Metadata(kind, event.map(lean::unwrapped)));
            let name = format!("{} metadata", entry.resource);
            handles.push(self.push(name, unlabelled.boxed()));
        }
        let config = match mode.selector() {
            Some(selector) => config.labels(selector),
            None => config,
        };
        let api: Api<LeanObject> = Api::all_with(self.client.clone(), &resource);
        let objects = watcher::watcher(api, config).backoff(watch_backoff());
        let objects = taking_turns(objects, self.lists.clone())
            .map(move |event| WatchEvent::Object(kind, event.map(lean::unwrapped)));
        handles.push(self.push(entry.resource.to_string(), objects.boxed()));
        self.running.insert(kind, (mode, handles));
    }

    /// Stops the watches of `kind`; they deliver nothing more.
    pub fn stop(&mut self, kind: KindId) {
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
        let policies = watcher::watcher(
            Api::<RetentionPolicy>::all(self.client.clone()),
            config.clone(),
        )
        .backoff(watch_backoff())
        .map(WatchEvent::Policy);
        self.push("RetentionPolicy".into(), policies.boxed());
        let cluster = watcher::watcher(
            Api::<ClusterRetentionPolicy>::all(self.client.clone()),
            config.clone(),
        )
        .backoff(watch_backoff())
        .map(WatchEvent::ClusterPolicy);
        self.push("ClusterRetentionPolicy".into(), cluster.boxed());
        let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(self.client.clone());
        let namespaces = watcher::watcher(namespaces, config)
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

type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// Events a watch's task decodes ahead of the loop.
const FORWARDED: usize = 16;

/// `events` that list only while holding one of `lists`' permits: from the list's start (the
/// watcher asks for the first page when polled after [`Event::Init`]) to its end, or to an error
/// (the retry queues again, so a kind that keeps failing cannot starve the others).
fn taking_turns<K: Send + 'static>(
    events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    lists: Arc<Semaphore>,
) -> Events<K> {
    let start: (Events<K>, Option<OwnedSemaphorePermit>) = (events.boxed(), None);
    stream::unfold(start, move |(mut events, mut permit)| {
        let lists = lists.clone();
        async move {
            let event = events.next().await?;
            match &event {
                Ok(Event::Init) if permit.is_none() => permit = lists.acquire_owned().await.ok(),
                Ok(Event::InitDone) | Err(_) => permit = None,
                Ok(_) => {}
            }
            Some((event, (events, permit)))
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn listing(events: Vec<Event<u8>>, lists: &Arc<Semaphore>) -> Events<u8> {
        let events = stream::iter(events.into_iter().map(Ok)).chain(stream::pending());
        taking_turns(events, lists.clone())
    }

    /// The next event if there is one now, as its debug form (events are not comparable).
    fn next(events: &mut Events<u8>) -> Option<String> {
        let event = events.next().now_or_never().flatten()?;
        Some(format!("{:?}", event.ok()?))
    }

    fn shown(event: Event<u8>) -> Option<String> {
        Some(format!("{event:?}"))
    }

    #[tokio::test]
    async fn kinds_take_turns_to_list_and_a_relist_keeps_its_turn() {
        let lists = Arc::new(Semaphore::new(1));
        let mut first = listing(
            vec![
                Event::Init,
                Event::InitApply(1),
                Event::Init,
                Event::InitDone,
                Event::Apply(2),
            ],
            &lists,
        );
        let mut second = listing(
            vec![Event::Init, Event::InitApply(3), Event::InitDone],
            &lists,
        );
        assert_eq!(next(&mut first), shown(Event::Init));
        assert_eq!(next(&mut second), None, "waits while the first kind lists");
        assert_eq!(next(&mut first), shown(Event::InitApply(1)));
        assert_eq!(
            next(&mut first),
            shown(Event::Init),
            "a list restarted keeps its permit"
        );
        assert_eq!(next(&mut second), None);
        assert_eq!(next(&mut first), shown(Event::InitDone));
        assert_eq!(next(&mut second), shown(Event::Init));
        assert_eq!(
            next(&mut first),
            shown(Event::Apply(2)),
            "watching needs no turn"
        );
        assert_eq!(next(&mut second), shown(Event::InitApply(3)));
        assert_eq!(next(&mut second), shown(Event::InitDone));
        assert_eq!(lists.available_permits(), 1);
    }
}
