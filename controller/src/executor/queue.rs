//! The executor's backlog: what waits for the request budget, fair between namespaces.
//!
//! The controller is shared by every namespace, and every request it sends comes out of one
//! client-side budget (`--qps`). Each priority used to be one FIFO (`VecDeque<Work>`): a
//! RetentionPolicy in one namespace whose 100,000 objects fell due at once queued 100,000
//! deletions ahead of another namespace's single due object, which then waited 100,000 / qps
//! seconds — one tenant starved the others.
//!
//! Now the namespaces take turns, one request each, as API Priority and Fairness shares the API
//! server between flows; a namespace whose backlog empties leaves the rotation, one that arrives
//! joins at its back. A flood waits behind itself: another namespace's work goes out within one
//! round (as many requests as namespaces with a backlog), whatever its priority.
//!
//! The priorities — deletions, then stamps and labels, then Events and Warnings — order a
//! namespace's own work. They used to order all work first, each priority a fair queue of its
//! own: every deletion waiting in any namespace went before any namespace's stamp or Warning, so
//! one namespace's flood of deletions held back another's `RetentionExpiring` notice (due at its
//! deadline less `notifyBefore`) by as long as the flood took, past the deadline it warned of.
//! What stays as it was:
//!
//! - stamps whose time has passed are passed over ([`Backlog::next`]), without using up their
//!   namespace's turn;
//! - informational work (Events, Warnings) beyond [`MAX_QUEUED_EVENTS`] is dropped, oldest first
//!   of the namespace with the longest such backlog, so the bound costs the tenant that floods,
//!   not the others. Deletions, stamps and labels are never dropped.
//!
//! The queue itself is [`kube_retention_runtime::fair`]'s, with one lane per priority.

use std::sync::Arc;

use jiff::Timestamp;
use kube::runtime::events::EventType;
use kube_retention_common::StampChange;
use kube_retention_common::kinds::Resource;

use kube_retention_runtime::fair::FairQueue;
use kube_retention_state::{Action, EventTarget};

/// Informational work (Events, Warnings) waiting for spare budget beyond this is dropped, so a
/// long backlog cannot grow the controller's memory without bound.
pub const MAX_QUEUED_EVENTS: usize = 10_000;

/// The priority of Events and Warnings: the only work that may be dropped.
const INFORMATIONAL: usize = 2;

/// Deletions, stamps and labels, Events and Warnings: see [`Work::priority`].
const PRIORITIES: usize = 3;

/// An Event to record when the budget has room.
#[derive(Debug, Clone)]
pub struct EventWork {
    pub target: EventTarget,
    pub namespace: String,
    pub type_: EventType,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// One request's worth of work.
#[derive(Debug, Clone)]
pub enum Work {
    /// An action on an object of this kind.
    Action(Action, Resource),
    Event(EventWork),
}

impl Work {
    /// 0 for deletions, 1 for stamps and labels, 2 for Events and Warnings.
    pub fn priority(&self) -> usize {
        match self {
            Work::Action(Action::Delete { .. }, _) => 0,
            Work::Action(Action::Stamp { .. } | Action::Label { .. }, _) => 1,
            Work::Action(Action::Warn { .. } | Action::Announce { .. }, _) | Work::Event(_) => {
                INFORMATIONAL
            }
        }
    }

    /// The namespace whose turn it takes; empty for cluster-scoped objects.
    pub fn namespace(&self) -> Arc<str> {
        match self {
            Work::Action(
                Action::Delete { key, .. }
                | Action::Stamp { key, .. }
                | Action::Label { key }
                | Action::Warn { key, .. }
                | Action::Announce { key, .. },
                _,
            ) => key.namespace.clone(),
            Work::Event(event) => Arc::from(event.namespace.as_str()),
        }
    }

    /// A stamp whose time has passed by `now`: it would announce what has already happened,
    /// and spend budget the deletions need.
    fn stale(&self, now: Timestamp) -> bool {
        matches!(
            self,
            Work::Action(Action::Stamp { change: StampChange::Set(at), .. }, _) if *at <= now
        )
    }
}

/// Work waiting for the budget: one queue per namespace served round robin, each namespace's
/// work in order of priority.
#[derive(Debug)]
pub struct Backlog {
    queue: FairQueue<Arc<str>, Work>,
}

impl Default for Backlog {
    fn default() -> Self {
        Self {
            queue: FairQueue::with_lanes(PRIORITIES),
        }
    }
}

impl Backlog {
    /// Queues `work` behind its namespace's work of the same priority. Returns the informational
    /// work dropped to keep within [`MAX_QUEUED_EVENTS`], if any: the oldest of the namespace
    /// with the longest such backlog.
    pub fn push(&mut self, work: Work) -> Option<Work> {
        let priority = work.priority();
        self.queue.push_to(priority, work.namespace(), work);
        if priority == INFORMATIONAL && self.queue.lane_len(INFORMATIONAL) > MAX_QUEUED_EVENTS {
            return self.queue.drop_oldest_of_longest(INFORMATIONAL);
        }
        None
    }

    /// The work of the namespace whose turn it is, its most urgent first; stamps stale by `now`
    /// are discarded on the way.
    pub fn next(&mut self, now: Timestamp) -> Option<Work> {
        self.queue.pop_valid(|work| !work.stale(now))
    }

    /// How much work waits, all priorities together.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many namespaces have work waiting.
    pub fn namespaces(&self) -> usize {
        self.queue.keys()
    }
}
