//! The evaluator's backlog: one lane of work per namespace, served a step at a time in turn
//! (as API Priority and Fairness serves flows), each lane holding at most one work per key.
//!
//! - **Coalesced.** A work for a key already waiting replaces it in place (a newer version of
//!   the object, a Cleaner woken again): a namespace that rewrites one object a thousand times
//!   holds one evaluation of it waiting, not a thousand; the replaced ones are counted. The
//!   work under way in a lane runs to its end (its answer may be stale, and is then dropped by
//!   whoever asked): replaced in place, a work edited faster than it runs would never finish,
//!   and would hold its lane's other work back for ever.
//! - **Preemptible.** A turn is one [`Work::step`] — one expression on one object — after which
//!   the namespace goes to the back of the round, so one object's many policies or a Cleaner's
//!   search over time hold up the others for a step, not for the whole work.
//! - **Bounded in memory.** Work waiting to start is weighed as it comes: past
//!   [`Bounds::namespace_bytes`] in a lane, or [`Bounds::queued_bytes`] in all, work is shed
//!   from the back of the heaviest lane — the tenant who queued the most pays — into tokens
//!   that keep their place and ask for the work again at their turn. The tokens themselves
//!   hold a key each: one per object of the namespace at most, as the controller's own records.
//! - **Coming back, bounded.** A token's turn asks its submitter for the work again (for a
//!   policy's object, one list of it by name). At most [`Bounds::returns`] are outstanding — asked for and not
//!   yet started — across every namespace, and a token waits its turn while that many are: so
//!   the API server sees at most that many such GETs at once, however many tokens there are.
//!   The work comes back first in its lane, the place it had, and is never shed again: shedding
//!   costs a tenant time, never its progress.
//!   Work under way (converted, partly evaluated: several times its object) is weighed after
//!   every step and never shed — shedding it would waste the steps it took, and under a flood
//!   no work would ever finish — so a work starts only while what is under way holds less than
//!   [`Bounds::started_bytes`]: with one lane's work at most under way beyond it.
//!
//! Hand-written for the same reason as [`kube_retention_runtime::fair`]: a few maps and deques, and the
//! scheduling crates come with runtimes of their own.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::bounds::{Bounds, Dropped};
use super::lane::{self, Entry, Kind, Lane};
use super::sandbox::Sandbox;
use super::work::{Progress, Work};

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
    /// Tokens whose turn asked for their work, the work not started yet.
    outstanding: usize,
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
            outstanding: 0,
            dropped: Dropped::default(),
        }
    }

    /// Queues `work` behind its namespace's others, or in place of the work of its key; work
    /// coming back from being shed goes first.
    pub fn push(&mut self, work: Box<dyn Work>) {
        let kind = lane::kind_of(work.as_ref());
        self.push_as(work, kind);
    }

    /// Queues the token of work shed before it came (the way to the thread was full: see
    /// [`crate::SENT_BOUND`]), as work shed here leaves one: it keeps its place and, at its
    /// turn, asks for the work again, within [`Bounds::returns`].
    pub fn push_shed(&mut self, token: Box<dyn Work>) {
        self.dropped.shed += 1;
        self.push_as(token, Kind::Token);
    }

    fn push_as(&mut self, work: Box<dyn Work>, kind: Kind) {
        let namespace = work.namespace().clone();
        let key = work.key();
        let weight = work.weight();
        let lane = self.lanes.entry(namespace.clone()).or_default();
        if lane.is_empty() {
            self.round.push_back(namespace.clone());
        }
        let entry = Entry { work, weight, kind };
        match lane.entries.insert(key.clone(), entry) {
            Some(replaced) => {
                self.dropped.superseded += 1;
                lane.queued -= replaced.weight;
                self.queued -= replaced.weight;
                if replaced.kind == Kind::Returning {
                    self.outstanding = self.outstanding.saturating_sub(1);
                }
                if kind == Kind::Returning {
                    // First in line, ahead of any token: what comes back starts before more
                    // is asked back, or the two would wait for each other.
                    lane.order.retain(|queued| queued != &key);
                    lane.order.push_front(key);
                }
            }
            None if kind == Kind::Returning => lane.order.push_front(key),
            None => lane.order.push_back(key),
        }
        lane.queued += weight;
        self.queued += weight;
        self.shed_past_bounds(&namespace);
    }

    /// A shed work asked for again will not come back (it is gone, or newer work replaced it).
    pub fn nothing_returned(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// Runs one step of the work under way in the first namespace in the round that may go, or
    /// starts its next: that `ready` lets go (its share of time), and whose work is under way
    /// or may start (room under way, and for a token, room for one more work to come back).
    /// That namespace goes to the back of the round; those held back keep their order. `None`
    /// when none may go.
    pub fn step(
        &mut self,
        mut ready: impl FnMut(&Arc<str>) -> bool,
        sandbox: &mut Sandbox,
    ) -> Option<Turn> {
        let room = self.started < self.bounds.started_bytes;
        let returns = self.outstanding < self.bounds.returns;
        let start = move |entry: &Entry| match entry.kind {
            Kind::Started => true,
            Kind::Waiting | Kind::Returning => room,
            Kind::Token => room && returns,
        };
        let turns = self.round.len();
        let namespace = (0..turns).find_map(|_| {
            let namespace = self.round.pop_front()?;
            let may_run = self
                .lanes
                .get(&namespace)
                .is_some_and(|lane| lane.next(start).is_some());
            let go = may_run && ready(&namespace);
            self.round.push_back(namespace.clone());
            go.then_some(namespace)
        })?;
        let lane = self.lanes.get_mut(&namespace)?;
        if let Some(entry) = lane.take_up(start)? {
            self.queued -= entry.weight;
            match entry.kind {
                Kind::Returning => self.outstanding = self.outstanding.saturating_sub(1),
                Kind::Token => self.outstanding += 1,
                Kind::Waiting | Kind::Started => {}
            }
            lane.current = Some((entry, 0));
        }
        let (entry, _) = lane.current.as_mut()?;
        if entry.kind == Kind::Started {
            self.started -= entry.weight;
        }
        entry.kind = Kind::Started;
        let progress = entry.work.step(sandbox);
        entry.weight = entry.work.weight();
        let done = match progress {
            Progress::More => {
                self.started += entry.weight;
                lane.stepped();
                None
            }
            Progress::Done => lane.current.take().map(|(entry, _)| entry.work),
        };
        if lane.is_empty() {
            self.lanes.remove(&namespace);
            self.round.retain(|turn| turn != &namespace);
        }
        Some(Turn { namespace, done })
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
            let mut lanes: Vec<(&Arc<str>, usize)> = self
                .lanes
                .iter()
                .map(|(namespace, lane)| (namespace, lane.queued))
                .collect();
            lanes.sort_by_key(|lane| std::cmp::Reverse(lane.1));
            let lanes: Vec<Arc<str>> = lanes
                .into_iter()
                .map(|(namespace, _)| namespace.clone())
                .collect();
            if !lanes.iter().any(|heaviest| self.shed_one(heaviest)) {
                return;
            }
        }
    }

    /// Sheds the last waiting work of `namespace` that holds anything (not work coming back);
    /// false where there is none.
    fn shed_one(&mut self, namespace: &Arc<str>) -> bool {
        let Some(lane) = self.lanes.get_mut(namespace) else {
            return false;
        };
        let sheddable = |entry: &Entry| entry.kind == Kind::Waiting && entry.weight > 0;
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
            kind: Kind::Token,
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
        self.lanes.values().map(lane::count).sum()
    }

    /// What the work waiting to start holds, and what the work under way holds.
    pub fn bytes(&self) -> (usize, usize) {
        (self.queued, self.started)
    }

    /// Shed works asked for again and not started yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    pub fn dropped(&self) -> Dropped {
        self.dropped
    }
}
