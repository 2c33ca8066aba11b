//! The evaluator's backlog: one lane of work per namespace, served a step at a time in turn
//! (as API Priority and Fairness serves flows), each lane holding at most one work per key.
//!
//! - **Coalesced.** A work for a key already queued replaces it in place (a newer version of
//!   the object, a Cleaner woken again): a namespace that rewrites one object a thousand times
//!   holds one evaluation of it, not a thousand; the replaced ones are counted.
//! - **Preemptible.** A turn is one [`Work::step`] — one expression on one object — after which
//!   the namespace goes to the back of the round, so one object's many policies or a Cleaner's
//!   search over time hold up the others for a step, not for the whole work.
//! - **Bounded in memory.** Work waiting to start is weighed as it comes: past
//!   [`Bounds::namespace_bytes`] in a lane, or [`Bounds::queued_bytes`] in all, work is shed
//!   from the back of the heaviest lane — the tenant who queued the most pays — into tokens
//!   that keep their place and ask for the work again at their turn. The tokens themselves
//!   hold a key each: one per object of the namespace at most, as the controller's own records.
//!   Work under way (converted, partly evaluated: several times its object) is weighed after
//!   every step and never shed — shedding it would waste the steps it took, and under a flood
//!   no work would ever finish — so a work starts only while what is under way holds less than
//!   [`Bounds::started_bytes`]: with one lane's work at most under way beyond it.
//!
//! Hand-written for the same reason as [`crate::fair`]: a few maps and deques, and the
//! scheduling crates come with runtimes of their own.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::work::{Progress, Work, WorkKey};

/// How much the queued work may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Waiting to start, in one namespace's lane.
    pub namespace_bytes: usize,
    /// Waiting to start, in every lane together.
    pub queued_bytes: usize,
    /// Under way: no work starts while what is under way holds this much.
    pub started_bytes: usize,
}

impl Default for Bounds {
    /// A namespace queues at most 8 MiB (five objects at etcd's 1.5 MiB limit), all of them
    /// 32 MiB, and work under way holds about 32 MiB more: beside the controller's working set
    /// and one evaluation's own bound, within the chart's memory limit (README, "What a
    /// namespace editor can and cannot make the controller do").
    fn default() -> Self {
        Self {
            namespace_bytes: 8 * 1024 * 1024,
            queued_bytes: 32 * 1024 * 1024,
            started_bytes: 32 * 1024 * 1024,
        }
    }
}

/// What the backlog let go of, counted since it began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Replaced by a newer work of the same key before it was done.
    pub superseded: u64,
    /// Shed to stay within the bounds (asked for again at their turn).
    pub shed: u64,
}

struct Entry {
    work: Box<dyn Work>,
    weight: usize,
    started: bool,
}

#[derive(Default)]
struct Lane {
    order: VecDeque<WorkKey>,
    entries: HashMap<WorkKey, Entry>,
    /// What its work waiting to start holds.
    queued: usize,
}

/// One step taken: whose, and the work if that step completed it.
pub struct Turn {
    pub namespace: Arc<str>,
    pub done: Option<Box<dyn Work>>,
}

pub struct Backlog {
    bounds: Bounds,
    lanes: HashMap<Arc<str>, Lane>,
    /// The namespaces with work, in the order of their turns.
    round: VecDeque<Arc<str>>,
    queued: usize,
    started: usize,
    dropped: Dropped,
}

impl Backlog {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            lanes: HashMap::new(),
            round: VecDeque::new(),
            queued: 0,
            started: 0,
            dropped: Dropped::default(),
        }
    }

    /// Queues `work` behind its namespace's others, or in place of the work of its key.
    pub fn push(&mut self, work: Box<dyn Work>) {
        let namespace = work.namespace().clone();
        let key = work.key();
        let weight = work.weight();
        let lane = self.lanes.entry(namespace.clone()).or_default();
        if lane.order.is_empty() {
            self.round.push_back(namespace.clone());
        }
        let entry = Entry {
            work,
            weight,
            started: false,
        };
        match lane.entries.insert(key.clone(), entry) {
            Some(replaced) if replaced.started => {
                self.dropped.superseded += 1;
                self.started -= replaced.weight;
            }
            Some(replaced) => {
                self.dropped.superseded += 1;
                lane.queued -= replaced.weight;
                self.queued -= replaced.weight;
            }
            None => lane.order.push_back(key),
        }
        lane.queued += weight;
        self.queued += weight;
        self.shed_past_bounds(&namespace);
    }

    /// Runs one step of the first work of the first namespace in the round that may go: that
    /// `ready` lets go (its share of time), and whose work is under way or may start. That
    /// namespace goes to the back of the round; those held back keep their place. `None` when
    /// no namespace may go.
    pub fn step(&mut self, mut ready: impl FnMut(&Arc<str>) -> bool) -> Option<Turn> {
        let room = self.started < self.bounds.started_bytes;
        let turns = self.round.len();
        let namespace = (0..turns).find_map(|_| {
            let namespace = self.round.pop_front()?;
            let may_run = self
                .front(&namespace)
                .is_some_and(|entry| entry.started || room);
            let go = may_run && ready(&namespace);
            self.round.push_back(namespace.clone());
            go.then_some(namespace)
        })?;
        let lane = self.lanes.get_mut(&namespace)?;
        let key = lane.order.front()?.clone();
        let entry = lane.entries.get_mut(&key)?;
        if entry.started {
            self.started -= entry.weight;
        } else {
            lane.queued -= entry.weight;
            self.queued -= entry.weight;
            entry.started = true;
        }
        let progress = entry.work.step();
        entry.weight = entry.work.weight();
        let done = match progress {
            Progress::More => {
                self.started += entry.weight;
                None
            }
            Progress::Done => {
                lane.order.pop_front();
                lane.entries.remove(&key).map(|entry| entry.work)
            }
        };
        if lane.order.is_empty() {
            self.lanes.remove(&namespace);
            self.round.retain(|turn| turn != &namespace);
        }
        Some(Turn { namespace, done })
    }

    fn front(&self, namespace: &Arc<str>) -> Option<&Entry> {
        let lane = self.lanes.get(namespace)?;
        lane.entries.get(lane.order.front()?)
    }

    /// Sheds work waiting to start from the back of `namespace`'s lane while it is past its
    /// bound, then from the back of the heaviest lane while all are past theirs.
    fn shed_past_bounds(&mut self, namespace: &Arc<str>) {
        while self
            .lanes
            .get(namespace)
            .is_some_and(|lane| lane.queued > self.bounds.namespace_bytes)
            && self.shed_one(namespace)
        {}
        while self.queued > self.bounds.queued_bytes {
            let heaviest = self
                .lanes
                .iter()
                .max_by_key(|(_, lane)| lane.queued)
                .map(|(namespace, _)| namespace.clone());
            if !heaviest.is_some_and(|heaviest| self.shed_one(&heaviest)) {
                return;
            }
        }
    }

    /// Sheds the last work of `namespace` that waits to start and holds anything; false where
    /// none does.
    fn shed_one(&mut self, namespace: &Arc<str>) -> bool {
        let Some(lane) = self.lanes.get_mut(namespace) else {
            return false;
        };
        let sheddable = |entry: &Entry| !entry.started && entry.weight > 0;
        let Some(key) = lane
            .order
            .iter()
            .rev()
            .find(|key| lane.entries.get(*key).is_some_and(sheddable))
            .cloned()
        else {
            return false;
        };
        let Some(entry) = lane.entries.remove(&key) else {
            return false;
        };
        let work = entry.work.shed();
        let weight = work.weight();
        lane.queued = lane.queued - entry.weight + weight;
        self.queued = self.queued - entry.weight + weight;
        let token = Entry {
            work,
            weight,
            started: false,
        };
        lane.entries.insert(key, token);
        self.dropped.shed += 1;
        true
    }

    pub fn is_empty(&self) -> bool {
        self.round.is_empty()
    }

    /// The namespaces with work, in the order of their turns.
    pub fn namespaces(&self) -> impl Iterator<Item = &Arc<str>> {
        self.round.iter()
    }

    /// How many works are queued or under way.
    pub fn len(&self) -> usize {
        self.lanes.values().map(|lane| lane.order.len()).sum()
    }

    /// What the work waiting to start holds, and what the work under way holds.
    pub fn bytes(&self) -> (usize, usize) {
        (self.queued, self.started)
    }

    pub fn dropped(&self) -> Dropped {
        self.dropped
    }
}
