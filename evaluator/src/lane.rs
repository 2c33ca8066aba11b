//! One namespace's lane of the evaluator's backlog: its work waiting to start, one per key, in
//! order ([`Lane::order`]); the work it runs now; and the works it started and set aside.
//!
//! Work under way runs to its end — a newer version of it waits its turn like any other — so
//! a lane always gets its work done however fast its objects change. Within the lane, works
//! take turns too: one that has run [`YIELD_EVERY`] steps without finishing is set aside, and
//! the lane's waiting work and the works set aside then go in turn, so one long work (a
//! Cleaner's search over time) does not hold back the rest of its namespace's (its policies'
//! evaluations, and the blast-radius count that waits for them).

use std::collections::{HashMap, VecDeque};

use super::work::{Work, WorkKey};

/// Steps a work takes before it is set aside for its lane's others.
pub const YIELD_EVERY: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Waiting to start, sheddable.
    Waiting,
    /// Shed work coming back: waiting to start, never shed again.
    Returning,
    /// A shed work's token: at its turn it asks for the work again.
    Token,
    /// Under way (run now, or set aside): counted as started, never shed.
    Started,
}

pub(super) struct Entry {
    pub(super) work: Box<dyn Work>,
    pub(super) weight: usize,
    pub(super) kind: Kind,
}

/// What a lane runs next.
pub(super) enum Next {
    /// Its work under way, or one set aside.
    Started,
    /// The first of its waiting work, to start.
    Waiting,
}

#[derive(Default)]
pub(super) struct Lane {
    /// The work it runs now, and the steps it took since it was last taken up.
    pub(super) current: Option<(Entry, usize)>,
    /// Works it started and set aside, in the order they were.
    pub(super) aside: VecDeque<Entry>,
    pub(super) order: VecDeque<WorkKey>,
    pub(super) entries: HashMap<WorkKey, Entry>,
    /// What its work waiting to start holds.
    pub(super) queued: usize,
    /// Whether a work set aside goes before the waiting work at the next turn.
    resume: bool,
}

impl Lane {
    pub(super) fn is_empty(&self) -> bool {
        self.current.is_none() && self.aside.is_empty() && self.order.is_empty()
    }

    /// What the lane would run next, where `start` says whether waiting work may start.
    pub(super) fn next(&self, start: impl Fn(&Entry) -> bool) -> Option<Next> {
        if self.current.is_some() {
            return Some(Next::Started);
        }
        let waiting = self
            .order
            .front()
            .and_then(|key| self.entries.get(key))
            .filter(|entry| start(entry));
        match (waiting, self.aside.is_empty()) {
            (Some(_), false) if self.resume => Some(Next::Started),
            (Some(_), _) => Some(Next::Waiting),
            (None, false) => Some(Next::Started),
            (None, true) => None,
        }
    }

    /// Takes up what [`Lane::next`] said: a work set aside, or the first waiting (answered with
    /// its kind before it started, for the backlog's counts). Nothing where nothing may go.
    pub(super) fn take_up(&mut self, start: impl Fn(&Entry) -> bool) -> Option<Option<Entry>> {
        let resume = matches!(self.next(&start)?, Next::Started);
        if self.current.is_some() {
            return Some(None);
        }
        if resume {
            let entry = self.aside.pop_front()?;
            self.resume = false;
            self.current = Some((entry, 0));
            return Some(None);
        }
        let key = self.order.pop_front()?;
        let entry = self.entries.remove(&key)?;
        self.queued -= entry.weight;
        self.resume = true;
        Some(Some(entry))
    }

    /// The work run now took a step and goes on: set aside once it took [`YIELD_EVERY`] while
    /// others wait.
    pub(super) fn stepped(&mut self) {
        let others = !self.aside.is_empty() || !self.order.is_empty();
        if let Some((_, steps)) = &mut self.current {
            *steps += 1;
            if *steps >= YIELD_EVERY
                && others
                && let Some((entry, _)) = self.current.take()
            {
                self.aside.push_back(entry);
                // The waiting work goes next, then the works set aside again.
                self.resume = false;
            }
        }
    }
}

/// Works a lane holds: waiting, run now and set aside.
pub(super) fn count(lane: &Lane) -> usize {
    lane.order.len() + usize::from(lane.current.is_some()) + lane.aside.len()
}

/// Whether `work` is waiting work coming back from being shed.
pub(super) fn kind_of(work: &dyn Work) -> Kind {
    match work.returning() {
        true => Kind::Returning,
        false => Kind::Waiting,
    }
}
