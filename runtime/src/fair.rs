//! One queue per key, served round robin: fair share between tenants, as API Priority and
//! Fairness shares the API server between flows. A key with a backlog gets one turn in every
//! round however long its backlog is, and a key that arrives joins the round at its back, so a
//! namespace that floods the controller waits behind itself, not in front of the others.
//!
//! A queue may have several lanes (priorities): a key's turn goes to the first item of its most
//! urgent lane that has one. The lanes order a key's own work, never one key's work before
//! another's turn: a flood of urgent work in one namespace cannot hold back another namespace's
//! less urgent work by more than a round.
//!
//! Hand-written: it is a `VecDeque` of keys over a map of `VecDeque`s, and the crates that
//! schedule fairly come with an async runtime or a scheduler of their own.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

#[derive(Debug)]
pub struct FairQueue<K, T> {
    /// Each key's items, one FIFO per lane, lane 0 the most urgent.
    queues: HashMap<K, Vec<VecDeque<T>>>,
    /// The keys with something queued, in the order of their turns.
    turns: VecDeque<K>,
    /// How many items wait in each lane, all keys together.
    lanes: Vec<usize>,
}

impl<K, T> Default for FairQueue<K, T> {
    /// A queue of one lane.
    fn default() -> Self {
        Self::with_lanes(1)
    }
}

impl<K, T> FairQueue<K, T> {
    /// A queue whose keys each have `lanes` lanes (at least one), lane 0 served first.
    pub fn with_lanes(lanes: usize) -> Self {
        Self {
            queues: HashMap::new(),
            turns: VecDeque::new(),
            lanes: vec![0; lanes.max(1)],
        }
    }
}

impl<K: Hash + Eq + Clone, T> FairQueue<K, T> {
    /// Queues `item` behind `key`'s others of its lane 0.
    pub fn push(&mut self, key: K, item: T) {
        self.push_to(0, key, item);
    }

    /// Queues `item` behind `key`'s others of `lane` (the last lane, if `lane` is past it).
    pub fn push_to(&mut self, lane: usize, key: K, item: T) {
        let lane = lane.min(self.lanes.len() - 1);
        let lanes = self.lanes.len();
        let queues = self.queues.entry(key.clone()).or_insert_with(|| {
            self.turns.push_back(key);
            (0..lanes).map(|_| VecDeque::new()).collect()
        });
        queues[lane].push_back(item);
        self.lanes[lane] += 1;
    }

    /// Puts `item` back ahead of `key`'s others of lane 0 (work taken that must be tried again
    /// first); a key with nothing queued joins the round at its back.
    pub fn push_front(&mut self, key: K, item: T) {
        let lanes = self.lanes.len();
        let queues = self.queues.entry(key.clone()).or_insert_with(|| {
            self.turns.push_back(key);
            (0..lanes).map(|_| VecDeque::new()).collect()
        });
        queues[0].push_front(item);
        self.lanes[0] += 1;
    }

    /// The first item of the key whose turn it is; that key goes to the back of the round.
    pub fn pop(&mut self) -> Option<T> {
        self.pop_valid(|_| true)
    }

    /// Like [`FairQueue::pop`], discarding the items `valid` refuses (superseded work) within
    /// the same turn: a key's turn goes to its first valid item.
    pub fn pop_valid(&mut self, valid: impl FnMut(&T) -> bool) -> Option<T> {
        self.pop_ready(|_| true, valid)
    }

    /// Like [`FairQueue::pop_valid`], passing over the keys `ready` says must wait: they keep
    /// their place in the round (each is asked once a call).
    pub fn pop_ready(
        &mut self,
        mut ready: impl FnMut(&K) -> bool,
        mut valid: impl FnMut(&T) -> bool,
    ) -> Option<T> {
        let mut waiting = 0;
        while waiting < self.turns.len()
            && let Some(key) = self.turns.pop_front()
        {
            let Some(queues) = self.queues.get_mut(&key) else {
                continue;
            };
            if !ready(&key) {
                self.turns.push_back(key);
                waiting += 1;
                continue;
            }
            let found = first_valid(queues, &mut self.lanes, &mut valid);
            if queues.iter().all(VecDeque::is_empty) {
                self.queues.remove(&key);
            } else {
                self.turns.push_back(key);
            }
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// Drops the oldest item of `lane` of the key with the most items in it (of keys tied, the
    /// first in the round): a bound on memory that costs the heaviest tenant, not the others.
    pub fn drop_oldest_of_longest(&mut self, lane: usize) -> Option<T> {
        // Reversed, so that of keys tied for the most the first in the round is chosen.
        let key = self
            .turns
            .iter()
            .rev()
            .filter_map(|key| Some((key, self.queues.get(key)?.get(lane)?.len())))
            .filter(|(_, len)| *len > 0)
            .max_by_key(|(_, len)| *len)
            .map(|(key, _)| key.clone())?;
        let queues = self.queues.get_mut(&key)?;
        let item = queues[lane].pop_front()?;
        self.lanes[lane] -= 1;
        if queues.iter().all(VecDeque::is_empty) {
            self.queues.remove(&key);
            self.turns.retain(|turn| turn != &key);
        }
        Some(item)
    }

    /// How many items wait, all lanes together.
    pub fn len(&self) -> usize {
        self.lanes.iter().sum()
    }

    /// How many items wait in `lane`.
    pub fn lane_len(&self, lane: usize) -> usize {
        self.lanes.get(lane).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many keys have something queued.
    pub fn keys(&self) -> usize {
        self.turns.len()
    }

    /// The keys with something queued, in the order of their turns.
    pub fn waiting_keys(&self) -> impl Iterator<Item = &K> {
        self.turns.iter()
    }
}

/// The first item `valid` takes from the most urgent lane that has one, discarding the refused
/// ones met on the way; `lens` counts each lane's items.
fn first_valid<T>(
    queues: &mut [VecDeque<T>],
    lens: &mut [usize],
    valid: &mut impl FnMut(&T) -> bool,
) -> Option<T> {
    for (queue, len) in queues.iter_mut().zip(lens.iter_mut()) {
        while let Some(item) = queue.pop_front() {
            *len -= 1;
            if valid(&item) {
                return Some(item);
            }
        }
    }
    None
}
