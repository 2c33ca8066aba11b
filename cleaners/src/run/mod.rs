//! The Cleaners' loop: a watch of Cleaners, one watch per kind and namespace their targets
//! refer to (started once discovery names the kind's resource, as narrow as the book plans it,
//! stopped when no Cleaner refers to it), a timer on the earliest scheduled evaluation, and
//! leadership — only the leader evaluates and cleans. The watches are the controller's kind:
//! a [`WatchSet`] whose tasks are supervised with the controller's, whose lists take turns with
//! its kinds' lists. Conditions are judged on the evaluator's thread, with every tenant's other
//! CEL ([`crate::judging`]); their verdicts come back here. The cleans their verdicts start run
//! a few at a time and one of a namespace's ([`Cleans`]). Statuses go to the controller's status
//! writer, which retries them.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use kube_retention_common::cleaner::{Cleaner, CleanerStatus};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::act::{Cleaned, Cleaning};

use super::book::{Book, Clean, CleanerKey, Scope, ScopeWatch, Unavailable};
use super::judging::CleanerOutcome;
use super::metrics::KindLabels;
use super::status::Problem;
use kube_retention_evaluator::Evaluator;
use kube_retention_io::lean;
use kube_retention_io::lean::{Decoded, LeanMetaText, LeanText};
use kube_retention_io::status_writes::{StatusOf, StatusWrites};
use kube_retention_io::watch_set::{Held, Ready, WatchSet, Watching};
use kube_retention_runtime::held::object_held_bytes;
use kube_retention_runtime::object_memory::Charge;

/// How often kinds that could not be watched are looked up again.
const REDISCOVER: Duration = Duration::from_secs(30);

/// The least time between two starts of one scope's watch: a tenant who keeps changing what
/// its Cleaners refer to lists its namespace at most this often.
const RESTART_EVERY: Duration = Duration::from_secs(5);

/// What one of the Cleaners' watches is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Watched {
    Cleaners,
    Targets(Scope),
}

enum CleanerEvent {
    Cleaner(Result<Event<Cleaner>, watcher::Error>),
    Target(Scope, Result<Event<DynamicObject>, watcher::Error>),
    /// An object of the scope, named, held more than the controller decodes of one
    /// ([`lean::OBJECT_BYTES`]): it came without what its Cleaners' conditions read.
    PastBound(Scope, String),
}

/// What a scope's watch read: its objects as text, whole or their metadata only, decoded into
/// a [`CleanerEvent`] once the Cleaners' watches have room for them.
enum TargetRead {
    Objects(Scope, Result<Event<LeanText>, watcher::Error>),
    Metadata(Scope, Result<Event<LeanMetaText>, watcher::Error>),
}

impl Ready for TargetRead {
    type Event = CleanerEvent;

    fn will_hold(&self) -> usize {
        match self {
            TargetRead::Objects(_, Ok(event)) => lean::event_held(event, LeanText::held),
            TargetRead::Metadata(_, Ok(event)) => lean::event_held(event, LeanMetaText::held),
            TargetRead::Objects(_, Err(_)) | TargetRead::Metadata(_, Err(_)) => 0,
        }
    }

    /// Objects decoded (a metadata watch's as objects without data); one added or changed past
    /// the bound, [`CleanerEvent::PastBound`].
    fn ready(self) -> CleanerEvent {
        let (scope, event) = match self {
            TargetRead::Objects(scope, event) => (
                scope,
                event.map(|event| lean::event_map(event, LeanText::decode_judged)),
            ),
            TargetRead::Metadata(scope, event) => (
                scope,
                event.map(|event| lean::event_map(event, metadata_decoded)),
            ),
        };
        match event {
            Ok(
                Event::Apply(Decoded::PastBound(identity))
                | Event::InitApply(Decoded::PastBound(identity)),
            ) => CleanerEvent::PastBound(scope, identity.name_any()),
            // Its going is told by its identity, as any object's.
            Ok(event) => {
                CleanerEvent::Target(scope, Ok(lean::event_map(event, Decoded::into_inner)))
            }
            Err(error) => CleanerEvent::Target(scope, Err(error)),
        }
    }
}

/// An object of a scope watched as metadata only, decoded, as an object without data.
fn metadata_decoded(text: LeanMetaText) -> Decoded<DynamicObject> {
    text.decode().map(|meta| DynamicObject {
        types: meta.types,
        metadata: meta.metadata,
        data: serde_json::Value::Null,
    })
}

impl Held for CleanerEvent {
    /// Targets as held; Cleaners, written within their schema, as nothing beside their count.
    fn held(&self) -> usize {
        match self {
            CleanerEvent::Target(
                _,
                Ok(Event::Apply(object) | Event::InitApply(object) | Event::Delete(object)),
            ) => object_held_bytes(object),
            _ => 0,
        }
    }
}

/// Discovery's answer for a kind.
type Resolution = (GroupVersionKind, Result<ApiResource, Unavailable>);
/// A clean's outcome.
type Finished = (Clean, Result<Cleaned, Problem>);
type Channel<T> = (mpsc::UnboundedSender<T>, mpsc::UnboundedReceiver<T>);

pub struct Cleaners {
    client: Client,
    cleaning: Arc<Cleaning>,
    book: Book,
    watches: WatchSet<Watched, CleanerEvent>,
    /// How each scope is watched, and since when.
    watching: HashMap<Scope, (ScopeWatch, Instant)>,
    /// When the watches are planned again, for a change that had to wait.
    replan_at: Option<Instant>,
    resolving: HashSet<GroupVersionKind>,
    resolutions: Channel<Resolution>,
    finished: Channel<Finished>,
    evaluator: Evaluator,
    judged: Channel<CleanerOutcome>,
    /// Whether this replica leads: only the leader evaluates and cleans.
    leading: bool,
    /// What was last written to each Cleaner's status.
    written: HashMap<CleanerKey, CleanerStatus>,
    statuses: StatusWrites,
    /// The cleans under way, and those waiting for a place.
    cleans: Cleans,
}

impl Cleaners {
    /// The Cleaners' loop, watching as `watching` says and writing statuses through `statuses`.
    pub fn new(
        cleaning: Cleaning,
        watching: Watching,
        statuses: StatusWrites,
        evaluator: Evaluator,
    ) -> Self {
        let client = cleaning.client.clone();
        let mut watches = WatchSet::new(watching);
        let cleaners = watches
            .configuration(Api::<Cleaner>::all(client.clone()), "Cleaner".into())
            .map(CleanerEvent::Cleaner);
        watches.start(Watched::Cleaners, "Cleaner".into(), cleaners.boxed());
        Self {
            client,
            cleaning: Arc::new(cleaning),
            book: Book::default(),
            watches,
            watching: HashMap::new(),
            replan_at: None,
            resolving: HashSet::new(),
            resolutions: mpsc::unbounded_channel(),
            finished: mpsc::unbounded_channel(),
            evaluator,
            judged: mpsc::unbounded_channel(),
            leading: false,
            written: HashMap::new(),
            statuses,
            cleans: Cleans::default(),
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
            self.leading = *leadership.borrow();
            if !self.leading {
                self.give_up_waiting_cleans();
            }
            if self.leading {
                let now = self.cleaning.clock.now();
                for key in self.book.take_due(now) {
                    self.evaluate(&key, now).await;
                }
            }
            let clock = self.cleaning.clock;
            let deadline = self
                .book
                .next_deadline()
                .map_or(far, |at| clock.instant_at(at));
            let replan = self.replan_at.unwrap_or(far);
            tokio::select! {
                (observed, charge) = self.watches.next() => self.observe(observed, charge),
                Some((kind, answer)) = self.resolutions.1.recv() => {
                    self.resolving.remove(&kind);
                    self.book.resolved(&kind, answer);
                }
                Some((clean, outcome)) = self.finished.1.recv() => self.finish(clean, outcome).await,
                Some(outcome) = self.judged.1.recv() => self.on_judged(outcome).await,
                () = tokio::time::sleep_until(deadline) => {}
                Ok(()) = leadership.changed() => {}
                _ = rediscover.tick() => self.book.retry_unavailable(),
                () = tokio::time::sleep_until(replan) => {
                    self.replan_at = None;
                    self.book.replan();
                }
                () = &mut shutdown => return,
            }
        }
    }

    /// An event of a Cleaners' watch; `charge` goes with a target object into the book.
    fn observe(&mut self, observed: CleanerEvent, charge: Charge) {
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
                    self.statuses.forget(&status_of(&key));
                    self.book.removed(&key);
                }
            },
            CleanerEvent::Target(scope, Ok(event)) => match event {
                Event::Init => {
                    self.book.objects_relisting(&scope);
                }
                Event::InitApply(object) | Event::Apply(object) => {
                    self.book.object_applied(&scope, object, charge)
                }
                Event::InitDone => {
                    let label = KindLabels {
                        kind: format!("{}.{}", scope.kind.kind, scope.kind.group),
                    };
                    self.cleaning.metrics.lists.get_or_create(&label).inc();
                    self.book.objects_listed(&scope);
                }
                Event::Delete(object) => self.book.object_deleted(&scope, &object.name_any()),
            },
            CleanerEvent::PastBound(scope, name) => {
                self.stop(&scope);
                let reason = Unavailable::PastBound(name);
                self.book.scope_refused(&scope, reason.to_string());
            }
            CleanerEvent::Cleaner(Err(error)) => {
                tracing::warn!(%error, "watching Cleaners failed; retrying")
            }
            CleanerEvent::Target(scope, Err(error)) => {
                let kind = &scope.kind;
                tracing::warn!(kind = %kind.kind, group = %kind.group, namespace = %scope.namespace, %error, "watching Cleaner targets failed; retrying");
                if let watcher::Error::InitialListFailed(kube::Error::Api(status))
                | watcher::Error::WatchFailed(kube::Error::Api(status)) = &error
                    && status.code == 403
                {
                    self.stop(&scope);
                    let reason = Unavailable::Forbidden(status.message.clone());
                    self.book.scope_refused(&scope, reason.to_string());
                }
            }
        }
    }
}

/// The Cleaner `key`, as the status writer names what it writes.
fn status_of(key: &CleanerKey) -> StatusOf {
    ObjectRef::<Cleaner>::new(&key.name)
        .within(&key.namespace)
        .erase()
}

pub mod cleans;
mod outcomes;
mod watching;

pub use cleans::Cleans;
pub use watching::DISCOVERIES;
