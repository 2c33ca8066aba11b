//! Carries out the state's decisions against the API server within a client-side request budget.
//!
//! The namespaces take turns, one request each ([`queue`]): the controller serves every
//! namespace, and one namespace's flood of deletions no longer queues ahead of another's single
//! due object, nor ahead of its notice or stamp. A namespace's own deletions come first, then its
//! stamps and labels, then its Events: under its own backlog its turns go to deleting, and its
//! informational writes catch up afterwards. Each DELETE is a single request carrying uid and
//! resourceVersion preconditions; a refused precondition means the object changed, and the watch
//! brings the version to judge instead. Failures go back to the state as [`Feedback`], which
//! backs the object off.
//!
//! The budget itself ([`Budget`]) is shared with the Cleaners, whose DELETEs wait on it too. So
//! do the circuit breakers ([`kube_retention_io::breaker`]): a DELETE its namespace's breaker or
//! the cluster's holds is kept aside, not sent, while stamps and Events still go (and other
//! namespaces' DELETEs, where only its namespace's holds it), and is sent once released.

use std::collections::HashMap;
use std::sync::Arc;

use digest::{Digest, Digested, Notice};
use jiff::SignedDuration;
use kube::Client;
use kube::api::PropagationPolicy;
use kube::runtime::events::{EventType, Recorder};
use kube_retention_runtime::supervise::{self, Supervised};
use tokio::sync::{Semaphore, mpsc};

use crate::metrics::Metrics;
use kube_retention_common::kinds::Registry;
use kube_retention_io::breaker::Breaker;
use kube_retention_io::clock::Clock;
use kube_retention_sinks::ledger::Ledger;
use kube_retention_state::{Action, Failure, ObjectKey, PolicyKey};

pub mod digest;
pub mod queue;
mod requests;

pub use kube_retention_io::budget::Budget;
use queue::{Backlog, EventWork, Work};

/// What the state must hear back about.
#[derive(Debug)]
pub enum Feedback {
    DeleteFailed {
        key: ObjectKey,
        failure: Failure,
    },
    StampFailed {
        key: ObjectKey,
        failure: Failure,
    },
    LabelFailed {
        key: ObjectKey,
        failure: Failure,
    },
    /// A deletion a retention policy caused succeeded.
    Deleted {
        policy: Arc<PolicyKey>,
    },
}

pub struct Settings {
    /// The request budget (`--qps`), shared with the Cleaners.
    pub budget: Budget,
    /// The circuit breakers, shared with the Cleaners: every DELETE asks them first.
    pub breaker: Breaker,
    pub propagation: PropagationPolicy,
    pub concurrency: usize,
    pub events: bool,
    /// Deletion Events of one group within this window become one ([`digest`]).
    pub event_window: std::time::Duration,
}

/// The executor's fixed collaborators.
pub struct Parts {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Metrics,
    pub recorder: Recorder,
    pub feedback: mpsc::UnboundedSender<Feedback>,
    /// The deletion ledger, where deletions are announced (and archived first, for policies
    /// with `archiveBeforeDelete`). Without one, such a policy's deletions wait.
    pub ledger: Option<Ledger>,
    /// The controller's clock: when a deletion is timed, ledgered, digested into an Event.
    pub clock: Clock,
}

#[derive(Clone)]
pub struct Executor {
    tx: mpsc::UnboundedSender<Work>,
    ledger: Option<Ledger>,
}

struct Shared {
    parts: Parts,
    notices: mpsc::UnboundedSender<Notice>,
}

impl Executor {
    /// Starts the executor's tasks, `executor-dispatch` and `event-digest`, for a supervisor:
    /// both run as long as the executor is used.
    pub fn spawn(parts: Parts) -> (Self, [Supervised; 2]) {
        let (tx, rx) = mpsc::unbounded_channel();
        let budget = parts.settings.budget.clone();
        let breaker = parts.settings.breaker.clone();
        let (notices, notices_rx) = mpsc::unbounded_channel();
        let window = SignedDuration::try_from(parts.settings.event_window).unwrap_or_default();
        let digest = digest_events(Digest::new(window), notices_rx, tx.clone(), parts.clock);
        let digest = supervise::spawn("event-digest", digest);
        let ledger = parts.ledger.clone();
        let shared = Arc::new(Shared { parts, notices });
        let dispatching = dispatch(shared, rx, budget, breaker);
        let dispatch = supervise::spawn("executor-dispatch", dispatching);
        (Self { tx, ledger }, [dispatch, digest])
    }

    /// Queues `action`, its kind looked up in `kinds`: the state's own table, the one registry
    /// (the executor keeps no copy to keep in step). An announcement goes to the ledger at
    /// once: it costs no API request, so it waits for no budget.
    pub fn submit(&self, action: Action, kinds: &Registry) {
        if let Action::Announce {
            event_type,
            entry,
            sink,
            ..
        } = &action
        {
            if let Some(ledger) = &self.ledger {
                ledger.announce(event_type, entry, sink.as_ref(), false);
            }
            return;
        }
        let resource = kinds[action.key().kind].resource.clone();
        self.tx.send(Work::Action(action, resource)).ok();
    }
}

/// Groups deletion notices into Events and queues each when its window closes.
async fn digest_events(
    mut digest: Digest,
    mut notices: mpsc::UnboundedReceiver<Notice>,
    tx: mpsc::UnboundedSender<Work>,
    clock: Clock,
) {
    let queue = |digested: Digested| {
        let event = EventWork {
            target: digested.target,
            namespace: digested.namespace,
            type_: EventType::Normal,
            reason: digested.reason,
            action: "Delete",
            note: digested.note,
        };
        tx.send(Work::Event(event)).ok();
    };
    loop {
        let closes = digest.next_due().map(|at| clock.instant_at(at));
        tokio::select! {
            notice = notices.recv() => match notice {
                Some(notice) => {
                    if let Some(digested) = digest.add(notice, clock.now()) {
                        queue(digested);
                    }
                }
                None => return,
            },
            () = async {
                match closes {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                digest.due(clock.now()).into_iter().for_each(queue);
            }
        }
    }
}

/// Queues `work`, counting the informational work the bound drops.
fn enqueue(backlog: &mut Backlog, work: Work, metrics: &Metrics) {
    if backlog.push(work).is_some() {
        metrics.events_dropped.inc();
    }
}

async fn dispatch(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Work>,
    budget: Budget,
    breaker: Breaker,
) {
    let mut backlog = Backlog::default();
    let metrics = &shared.parts.metrics;
    let permits = Arc::new(Semaphore::new(shared.parts.settings.concurrency.max(1)));
    // DELETEs a circuit breaker holds, sent again once it is released.
    let mut held = Held::default();
    let mut changes = breaker.subscribe();
    loop {
        if changes.has_changed().unwrap_or(false) {
            changes.mark_unchanged();
            for work in held.released(&breaker) {
                enqueue(&mut backlog, work, metrics);
            }
        }
        if backlog.is_empty() {
            tokio::select! {
                work = rx.recv() => match work {
                    Some(work) => enqueue(&mut backlog, work, metrics),
                    None => return,
                },
                Ok(()) = changes.changed(), if !held.is_empty() => {
                    for work in held.released(&breaker) {
                        enqueue(&mut backlog, work, metrics);
                    }
                    continue;
                }
            }
        }
        while let Ok(work) = rx.try_recv() {
            enqueue(&mut backlog, work, metrics);
        }
        if budget.is_limited() {
            budget.acquire().await;
            // Work that arrived while waiting may outrank what was queued.
            while let Ok(work) = rx.try_recv() {
                enqueue(&mut backlog, work, metrics);
            }
        }
        let Some(work) = backlog.next(shared.parts.clock.now()) else {
            continue;
        };
        if matches!(work, Work::Action(Action::Delete { .. }, _))
            && !breaker.admit(&work.namespace())
        {
            held.hold(work, &breaker);
            continue;
        }
        let shared = shared.clone();
        if archives_first(&work) {
            // Its archive may wait on a sink for seconds: not in an executor slot.
            tokio::spawn(async move { perform(&shared, work).await });
            continue;
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        tokio::spawn(async move {
            perform(&shared, work).await;
            drop(permit);
        });
    }
}

/// The DELETEs a circuit breaker holds, by namespace: a release lets go only those no breaker
/// holds any more, and looks at no other namespace's.
#[derive(Default)]
struct Held {
    by_namespace: HashMap<Arc<str>, Vec<Work>>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// `work`, a DELETE the breaker did not admit, waits.
    fn hold(&mut self, work: Work, breaker: &Breaker) {
        let namespace = work.namespace();
        breaker.hold(&namespace, 1);
        self.by_namespace.entry(namespace).or_default().push(work);
    }

    /// The DELETEs no breaker holds any more (a release), taken out.
    fn released(&mut self, breaker: &Breaker) -> Vec<Work> {
        let free: Vec<Arc<str>> = self
            .by_namespace
            .keys()
            .filter(|namespace| !breaker.holds(namespace))
            .cloned()
            .collect();
        let mut released = Vec::new();
        for namespace in free {
            let works = self.by_namespace.remove(&namespace).unwrap_or_default();
            breaker.held_went(&namespace, works.len());
            released.extend(works);
        }
        released
    }
}

/// A DELETE its policy's sink must acknowledge first (`archiveBeforeDelete`).
fn archives_first(work: &Work) -> bool {
    matches!(
        work,
        Work::Action(Action::Delete { ledger: Some(ledger), .. }, _) if ledger.archive
    )
}

async fn perform(shared: &Shared, work: Work) {
    match work {
        Work::Action(
            Action::Warn {
                key,
                target,
                warning,
                note,
            },
            _,
        ) => {
            let event = EventWork {
                target,
                namespace: key.namespace.to_string(),
                type_: EventType::Warning,
                reason: warning.reason(),
                action: warning.action(),
                note,
            };
            requests::record(shared, event).await;
        }
        Work::Action(action @ Action::Delete { .. }, resource) => {
            requests::delete(shared, action, &resource).await;
        }
        Work::Action(
            Action::Stamp {
                key,
                change,
                resource_version,
            },
            resource,
        ) => requests::stamp(shared, key, &resource, change, &resource_version).await,
        Work::Action(Action::Label { key }, resource) => {
            requests::label(shared, key, &resource).await;
        }
        Work::Event(event) => requests::record(shared, event).await,
        // Announcements never queue: `Executor::submit` hands them to the ledger.
        Work::Action(Action::Announce { .. }, _) => {}
    }
}
