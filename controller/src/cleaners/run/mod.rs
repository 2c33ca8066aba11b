//! The Cleaners' loop: a watch of Cleaners, one watch per kind their targets refer to (started
//! once discovery names its resource, stopped when no Cleaner refers to it), a timer on the
//! earliest scheduled evaluation, and leadership — only the leader evaluates and cleans.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use kube_retention_common::cleaner::{Cleaner, CleanerStatus};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::act::{Cleaned, Cleaning};
use kube_retention_runtime::discovery::served;

use super::book::{Book, Clean, CleanerKey, KindState, Unavailable};
use super::metrics::KindLabels;
use super::status::Problem;
use crate::initial_list::Lists;
use crate::lean::{self, LeanObject};
use crate::watch_backoff::watch_backoff;

/// How often kinds that could not be watched are looked up again.
const REDISCOVER: Duration = Duration::from_secs(30);

enum CleanerEvent {
    Cleaner(Result<Event<Cleaner>, watcher::Error>),
    Target(
        GroupVersionKind,
        Result<Event<DynamicObject>, watcher::Error>,
    ),
}

/// Discovery's answer for a kind.
type Resolution = (GroupVersionKind, Result<ApiResource, Unavailable>);
/// A clean's outcome.
type Finished = (Clean, Result<Cleaned, Problem>);
type Channel<T> = (mpsc::UnboundedSender<T>, mpsc::UnboundedReceiver<T>);

pub struct Cleaners {
    client: Client,
    lists: Lists,
    cleaning: Arc<Cleaning>,
    book: Book,
    streams: SelectAll<BoxStream<'static, CleanerEvent>>,
    watching: HashMap<GroupVersionKind, AbortHandle>,
    resolving: HashSet<GroupVersionKind>,
    resolutions: Channel<Resolution>,
    finished: Channel<Finished>,
    /// What was last written to each Cleaner's status.
    written: HashMap<CleanerKey, CleanerStatus>,
}

impl Cleaners {
    pub fn new(cleaning: Cleaning, lists: Lists) -> Self {
        let client = cleaning.client.clone();
        let cleaners = lists
            .watch(
                Api::<Cleaner>::all(client.clone()),
                watcher::Config::default(),
                "Cleaner".into(),
            )
            .backoff(watch_backoff())
            .map(CleanerEvent::Cleaner);
        let mut streams = SelectAll::new();
        streams.push(cleaners.boxed());
        Self {
            client,
            lists,
            cleaning: Arc::new(cleaning),
            book: Book::default(),
            streams,
            watching: HashMap::new(),
            resolving: HashSet::new(),
            resolutions: mpsc::unbounded_channel(),
            finished: mpsc::unbounded_channel(),
            written: HashMap::new(),
        }
    }

    pub async fn run(
        mut self,
        mut leadership: watch::Receiver<bool>,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut rediscover = tokio::time::interval(REDISCOVER);
        let far = Instant::now() + Duration::from_secs(3600 * 24 * 365);
        loop {
            self.follow_kinds();
            if *leadership.borrow() {
                let now = Timestamp::now();
                for key in self.book.take_due(now) {
                    self.evaluate(&key, now).await;
                }
            }
            let deadline = self.book.next_deadline().map_or(far, instant_at);
            tokio::select! {
                Some(observed) = self.streams.next() => self.observe(observed),
                Some((kind, answer)) = self.resolutions.1.recv() => {
                    self.resolving.remove(&kind);
                    self.book.resolved(&kind, answer);
                }
                Some((clean, outcome)) = self.finished.1.recv() => self.finish(clean, outcome).await,
                () = tokio::time::sleep_until(deadline) => {}
                Ok(()) = leadership.changed() => {}
                _ = rediscover.tick() => self.book.retry_unavailable(),
                () = &mut shutdown => return,
            }
        }
    }

    fn observe(&mut self, observed: CleanerEvent) {
        match observed {
            CleanerEvent::Cleaner(Ok(event)) => match event {
                Event::Init => self.book.relist_started(),
                Event::InitApply(cleaner) | Event::Apply(cleaner) => self.book.applied(&cleaner),
                Event::InitDone => self.book.relist_done(),
                Event::Delete(cleaner) => {
                    let key = CleanerKey {
                        namespace: cleaner.namespace().unwrap_or_default(),
                        name: cleaner.name_any(),
                    };
                    self.written.remove(&key);
                    self.book.removed(&key);
                }
            },
            CleanerEvent::Target(kind, Ok(event)) => match event {
                Event::Init => {
                    if let Some(objects) = self.book.objects_mut(&kind) {
                        objects.relist_started();
                    }
                }
                Event::InitApply(object) | Event::Apply(object) => {
                    self.book.object_applied(&kind, object)
                }
                Event::InitDone => {
                    let label = KindLabels {
                        kind: format!("{}.{}", kind.kind, kind.group),
                    };
                    self.cleaning.metrics.lists.get_or_create(&label).inc();
                    self.book.objects_listed(&kind);
                }
                Event::Delete(object) => {
                    let namespace = object.namespace().unwrap_or_default();
                    self.book
                        .object_deleted(&kind, &namespace, &object.name_any());
                }
            },
            CleanerEvent::Cleaner(Err(error)) => {
                tracing::warn!(%error, "watching Cleaners failed; retrying")
            }
            CleanerEvent::Target(kind, Err(error)) => {
                tracing::warn!(kind = %kind.kind, group = %kind.group, %error, "watching Cleaner targets failed; retrying");
                if let watcher::Error::InitialListFailed(kube::Error::Api(status))
                | watcher::Error::WatchFailed(kube::Error::Api(status)) = &error
                    && status.code == 403
                {
                    self.stop(&kind);
                    let reason = Unavailable::Forbidden(status.message.clone());
                    self.book.resolved(&kind, Err(reason));
                }
            }
        }
    }

    /// Starts discovery for new kinds and watches for resolved ones; stops unreferenced watches.
    fn follow_kinds(&mut self) {
        let mut referenced = HashSet::new();
        let mut resolve = Vec::new();
        let mut watch = Vec::new();
        for (kind, state) in self.book.kinds() {
            referenced.insert(kind.clone());
            match state {
                KindState::Resolving if !self.resolving.contains(kind) => {
                    resolve.push(kind.clone())
                }
                KindState::Served(objects) if !self.watching.contains_key(kind) => {
                    watch.push((kind.clone(), objects.resource.clone()));
                }
                _ => {}
            }
        }
        for kind in resolve {
            self.resolving.insert(kind.clone());
            let (client, answers) = (self.client.clone(), self.resolutions.0.clone());
            tokio::spawn(async move {
                let answer = match served(&client, &kind.api_version(), &kind.kind).await {
                    Ok(Some(served)) => Ok(served.resource),
                    Ok(None) => Err(Unavailable::NotServed(format!(
                        "{} serves no {}",
                        kind.api_version(),
                        kind.kind
                    ))),
                    Err(error) => Err(Unavailable::NotServed(error.to_string())),
                };
                answers.send((kind, answer)).ok();
            });
        }
        for (kind, resource) in watch {
            let api: Api<LeanObject> = Api::all_with(self.client.clone(), &resource);
            let label = kind.clone();
            let events = self
                .lists
                .watch(
                    api,
                    watcher::Config::default(),
                    format!("Cleaners' {kind:?}"),
                )
                .backoff(watch_backoff())
                .map(move |event| CleanerEvent::Target(label.clone(), event.map(lean::unwrapped)));
            let (handle, registration) = AbortHandle::new_pair();
            self.streams
                .push(Abortable::new(events, registration).boxed());
            self.watching.insert(kind, handle);
        }
        let unreferenced: Vec<GroupVersionKind> = self
            .watching
            .keys()
            .filter(|kind| !referenced.contains(*kind))
            .cloned()
            .collect();
        for kind in unreferenced {
            self.stop(&kind);
        }
    }

    fn stop(&mut self, kind: &GroupVersionKind) {
        if let Some(handle) = self.watching.remove(kind) {
            handle.abort();
        }
    }
}

mod outcomes;

fn instant_at(at: Timestamp) -> Instant {
    let wait = at.duration_since(Timestamp::now());
    Instant::now() + Duration::try_from(wait).unwrap_or(Duration::ZERO)
}
