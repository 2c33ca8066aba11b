//! The cleans under way, and those waiting for a place: at most [`IN_FLIGHT`] at once and
//! [`PER_NAMESPACE`] of one namespace's, the waiting ones served a namespace at a time
//! ([`FairQueue`]). A clean spends the request budget and waits on the circuit breakers for
//! each DELETE; without this bound a tenant whose thousand Cleaners fell due together had a
//! thousand tasks racing the executor for every request the budget allowed, and every other
//! namespace's deletions waited behind them. A waiting clean is its group's names and uids, no
//! task.

use std::collections::HashMap;

use kube_retention_runtime::fair::FairQueue;

use crate::book::Clean;

/// Cleans under way at once.
pub const IN_FLIGHT: usize = 8;
/// One namespace's cleans under way at once.
pub const PER_NAMESPACE: usize = 1;

#[derive(Debug, Default)]
pub struct Cleans {
    waiting: FairQueue<String, Clean>,
    /// Cleans under way, by namespace.
    under_way: HashMap<String, usize>,
    in_flight: usize,
}

impl Cleans {
    /// `clean` waits for its place.
    pub fn submit(&mut self, clean: Clean) {
        self.waiting.push(clean.cleaner.namespace.clone(), clean);
    }

    /// The next clean to start, if a place is free for one waiting; it counts as under way
    /// until [`Cleans::ended`].
    pub fn start_next(&mut self) -> Option<Clean> {
        if self.in_flight >= IN_FLIGHT {
            return None;
        }
        let under_way = &self.under_way;
        let free =
            |namespace: &String| under_way.get(namespace).copied().unwrap_or(0) < PER_NAMESPACE;
        let clean = self.waiting.pop_ready(free, |_| true)?;
        self.in_flight += 1;
        *self
            .under_way
            .entry(clean.cleaner.namespace.clone())
            .or_default() += 1;
        Some(clean)
    }

    /// A clean of `namespace` ended: its place is free.
    pub fn ended(&mut self, namespace: &str) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(count) = self.under_way.get_mut(namespace) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.under_way.remove(namespace);
            }
        }
    }

    /// Takes every waiting clean out (this replica stopped leading: none of them starts).
    pub fn drain_waiting(&mut self) -> Vec<Clean> {
        std::iter::from_fn(|| self.waiting.pop()).collect()
    }

    /// Cleans waiting, and under way.
    pub fn load(&self) -> (usize, usize) {
        (self.waiting.len(), self.in_flight)
    }
}
