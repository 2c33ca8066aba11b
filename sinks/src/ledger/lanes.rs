//! What waits for delivery to sinks, and which goes next: pure and clock-injected (tokio's
//! `Instant`, so tests pause time). One queue per namespace and sink, served round robin
//! ([`FairQueue`]); a sink that fails backs off, its queues skipped — not waited on in a slot —
//! until its pause is over; and the attempts under way are bounded in all, per namespace and per
//! sink, so one tenant's sinks that hang hold at most its own share of them.
//!
//! Issue 57's fifth reproduction: every tenant and the admin's `--ledger-sink` shared one queue
//! and sixteen slots, each failed attempt held a slot for its whole ten seconds and slept its
//! backoff there too, and after one tenant's 200 deletions announced to a closed port every
//! other tenant's announcements, and the admin's, were dropped. Here:
//!
//! - a failed attempt frees its slot at once; its sink's next attempt waits until the attempt's
//!   whole timeout has passed (a closed port and a filtered one still take as long: nothing a
//!   tenant sees tells them apart) and the sink's backoff after it ([`Lanes::failed`]);
//! - a namespace has at most [`Limits::per_namespace`] attempts under way, a sink at most
//!   [`Limits::per_sink`], all at most [`Limits::in_flight`]: the slots a namespace cannot take
//!   go to the others' turns;
//! - at most [`Limits::queued`] items are held in all, waiting or under way; past it the oldest
//!   item of the longest queue is dropped, which costs whoever floods, not the others.
//!
//! The admin's `--ledger-sink` has lanes of its own ([`super::lane`]): it never shares a queue
//! or a slot with a tenant's sink.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cloudevents::Event;
use kube_retention_runtime::fair::FairQueue;
use tokio::time::Instant;

use super::metrics::SinkLabels;
use crate::{Delivery, Undelivered};

/// The longest a failing sink pauses between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What is told of an item's end: delivered, or why not.
pub type Done = Box<dyn FnOnce(Result<(), Undelivered>) + Send>;

/// The bounds of one set of lanes.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Items held, waiting or under way, all queues together.
    pub queued: usize,
    /// Attempts under way at once.
    pub in_flight: usize,
    /// Attempts under way at once for one namespace's items.
    pub per_namespace: usize,
    /// Attempts under way at once to one sink.
    pub per_sink: usize,
    /// Attempts per item, the first pause after a failure, and each attempt's time.
    pub delivery: Delivery,
}

/// One event for one sink, of one namespace's.
pub struct Item {
    /// The namespace whose turn it takes: the deleted object's, the Cleaner's.
    pub namespace: Arc<str>,
    pub sink: Arc<str>,
    /// How the ledger's metrics count it; `None`: not a ledger event (a Cleaner's).
    pub label: Option<SinkLabels>,
    pub event: Event,
    /// Attempts made so far.
    pub attempts: u32,
    /// Told of its end, if anyone waits for it.
    pub done: Option<Done>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("namespace", &self.namespace)
            .field("sink", &self.sink)
            .field("label", &self.label)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl Item {
    /// Tells whoever waits for it how it ended.
    pub fn end(self, outcome: Result<(), Undelivered>) {
        if let Some(done) = self.done {
            done(outcome);
        }
    }
}

/// A queue's key: the namespace and the sink.
type Key = (Arc<str>, Arc<str>);

/// A sink's attempts and pause.
struct SinkState {
    queued: usize,
    in_flight: usize,
    /// No attempt before this: a failed one's timeout and the pause after it.
    ready_at: Option<Instant>,
    /// While it keeps failing: the pauses to come.
    pauses: Option<Box<dyn Iterator<Item = Duration> + Send>>,
}

pub struct Lanes {
    limits: Limits,
    queue: FairQueue<Key, Item>,
    sinks: HashMap<Arc<str>, SinkState>,
    /// Attempts under way, by namespace.
    namespaces: HashMap<Arc<str>, usize>,
    in_flight: usize,
}

impl Lanes {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            queue: FairQueue::default(),
            sinks: HashMap::new(),
            namespaces: HashMap::new(),
            in_flight: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Items waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Attempts under way.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues `item` behind its queue's others; answers the item dropped to make room, if any
    /// (the oldest of the longest queue: perhaps this one's).
    pub fn push(&mut self, item: Item) -> Option<Item> {
        let key = (item.namespace.clone(), item.sink.clone());
        self.sink(&item.sink).queued += 1;
        self.queue.push(key, item);
        if self.queue.len() + self.in_flight <= self.limits.queued.max(1) {
            return None;
        }
        let dropped = self.queue.drop_oldest_of_longest(0)?;
        self.unqueued(&dropped.sink);
        Some(dropped)
    }

    /// The item to attempt now, if a slot is free and some queue's turn may go: its namespace and
    /// sink within their attempts, its sink not pausing. It counts as under way until
    /// [`Lanes::delivered`], [`Lanes::ended`] or [`Lanes::failed`].
    pub fn next(&mut self, now: Instant) -> Option<Item> {
        if self.in_flight >= self.limits.in_flight.max(1) {
            return None;
        }
        let (sinks, namespaces, limits) = (&self.sinks, &self.namespaces, &self.limits);
        let ready = |(namespace, sink): &Key| {
            let busy = namespaces.get(namespace).copied().unwrap_or(0);
            let sink = sinks.get(sink);
            busy < limits.per_namespace.max(1)
                && sink.is_none_or(|sink| {
                    sink.in_flight < limits.per_sink.max(1)
                        && sink.ready_at.is_none_or(|at| at <= now)
                })
        };
        let item = self.queue.pop_ready(ready, |_| true)?;
        self.in_flight += 1;
        *self.namespaces.entry(item.namespace.clone()).or_default() += 1;
        let sink = self.sink(&item.sink);
        sink.queued -= 1;
        sink.in_flight += 1;
        Some(item)
    }

    /// `item`'s attempt delivered it: its sink's pauses are over.
    pub fn delivered(&mut self, item: &Item) {
        self.attempted(item);
        if let Some(sink) = self.sinks.get_mut(&item.sink) {
            sink.ready_at = None;
            sink.pauses = None;
        }
        self.forget_idle(&item.sink);
    }

    /// `item`'s attempt ended without a failure to retry (refused by the sink policy, or
    /// unsendable): it is done with.
    pub fn ended(&mut self, item: &Item) {
        self.attempted(item);
        self.forget_idle(&item.sink);
    }

    /// `item`'s attempt, started at `started`, failed: its sink pauses until the attempt's whole
    /// timeout has passed and a backoff after it, and the item goes back to the head of its
    /// queue — or, its attempts spent, is answered to be reported undelivered.
    pub fn failed(&mut self, mut item: Item, started: Instant) -> Option<Item> {
        self.attempted(&item);
        let delivery = &self.limits.delivery;
        let (timeout, first) = (delivery.timeout, delivery.first_backoff);
        let pauses = delivery.pauses();
        let sink = self.sink(&item.sink);
        let pause = sink
            .pauses
            .get_or_insert_with(|| Box::new(pauses))
            .next()
            .unwrap_or(first)
            .min(MAX_BACKOFF);
        let at = started + timeout + pause;
        sink.ready_at = Some(sink.ready_at.map_or(at, |ready| ready.max(at)));
        item.attempts += 1;
        if item.attempts >= self.limits.delivery.attempts {
            self.forget_idle(&item.sink);
            return Some(item);
        }
        self.sink(&item.sink).queued += 1;
        let key = (item.namespace.clone(), item.sink.clone());
        self.queue.push_front(key, item);
        None
    }

    /// When a sink that has items waiting may be attempted again, the earliest after `now`.
    pub fn wake_at(&self, now: Instant) -> Option<Instant> {
        self.sinks
            .values()
            .filter(|sink| sink.queued > 0)
            .filter_map(|sink| sink.ready_at)
            .filter(|at| *at > now)
            .min()
    }

    /// Sinks remembered: those with items waiting or under way.
    pub fn sinks(&self) -> usize {
        self.sinks.len()
    }

    fn sink(&mut self, sink: &Arc<str>) -> &mut SinkState {
        self.sinks.entry(sink.clone()).or_insert_with(|| SinkState {
            queued: 0,
            in_flight: 0,
            ready_at: None,
            pauses: None,
        })
    }

    /// An attempt of `item` is no longer under way.
    fn attempted(&mut self, item: &Item) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(busy) = self.namespaces.get_mut(&item.namespace) {
            *busy = busy.saturating_sub(1);
            if *busy == 0 {
                self.namespaces.remove(&item.namespace);
            }
        }
        if let Some(sink) = self.sinks.get_mut(&item.sink) {
            sink.in_flight = sink.in_flight.saturating_sub(1);
        }
    }

    /// An item of `sink` left its queue without an attempt (dropped).
    fn unqueued(&mut self, sink: &Arc<str>) {
        if let Some(state) = self.sinks.get_mut(sink) {
            state.queued = state.queued.saturating_sub(1);
        }
        self.forget_idle(sink);
    }

    /// Forgets `sink` once nothing of it waits or is under way: what is remembered is bounded
    /// by what is queued and in flight. A sink forgotten while pausing starts afresh with its
    /// next item, whose attempt then holds one of its namespace's slots for at most a timeout.
    fn forget_idle(&mut self, sink: &Arc<str>) {
        if self
            .sinks
            .get(sink)
            .is_some_and(|state| state.queued == 0 && state.in_flight == 0)
        {
            self.sinks.remove(sink);
        }
    }
}
