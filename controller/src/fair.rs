//! One queue per key, served round robin: fair share between tenants, as API Priority and
//! Fairness shares the API server between flows. A key with a backlog gets one turn in every
//! round however long its backlog is, and a key that arrives joins the round at its back, so a
//! namespace that floods the controller waits behind itself, not in front of the others.
//!
//! Hand-written: it is a `VecDeque` of keys over a map of `VecDeque`s, and the crates that
//! schedule fairly come with an async runtime or a scheduler of their own.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

#[derive(Debug)]
pub struct FairQueue<K, T> {
    queues: HashMap<K, VecDeque<T>>,
    /// The keys with something queued, in the order of their turns.
    turns: VecDeque<K>,
    len: usize,
}

impl<K, T> Default for FairQueue<K, T> {
    fn default() -> Self {
        Self {
            queues: HashMap::new(),
            turns: VecDeque::new(),
            len: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, T> FairQueue<K, T> {
    /// Queues `item` behind `key`'s others.
    pub fn push(&mut self, key: K, item: T) {
        let queue = self.queues.entry(key.clone()).or_default();
        if queue.is_empty() {
            self.turns.push_back(key);
        }
        queue.push_back(item);
        self.len += 1;
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
            let Some(queue) = self.queues.get_mut(&key) else {
                continue;
            };
            if !ready(&key) {
                self.turns.push_back(key);
                waiting += 1;
                continue;
            }
            let mut found = None;
            while let Some(item) = queue.pop_front() {
                self.len -= 1;
                if valid(&item) {
                    found = Some(item);
                    break;
                }
            }
            if queue.is_empty() {
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

    /// Drops the oldest item of the key with the longest queue, where `droppable` says it may
    /// go: a bound on memory that costs the heaviest tenant, not the others.
    pub fn drop_oldest_of_longest(&mut self, droppable: impl Fn(&T) -> bool) -> Option<T> {
        let key = self
            .queues
            .iter()
            .filter(|(_, queue)| queue.front().is_some_and(&droppable))
            .max_by_key(|(_, queue)| queue.len())
            .map(|(key, _)| key.clone())?;
        let queue = self.queues.get_mut(&key)?;
        let item = queue.pop_front();
        if queue.is_empty() {
            self.queues.remove(&key);
            self.turns.retain(|turn| turn != &key);
        }
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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
