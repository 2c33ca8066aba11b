//! Relists a policy change asks for, at most one per kind (or per kind in a namespace) per
//! window. A change to a RetentionPolicy or ClusterRetentionPolicy (a new generation, a policy
//! added or removed, a namespace's labels under a `namespaceSelector`) lists the kinds it names
//! afresh, because the state keeps compact records, not the objects a changed policy must judge
//! again: a ClusterRetentionPolicy's cluster-wide, a RetentionPolicy's in its own namespace only
//! (the controller's `run::Relist`). Policies are written by namespace editors: without a bound, one
//! tenant editing its policy every second would have the controller LIST its objects every
//! second.
//!
//! The first request for a kind relists at once, so a single change takes effect as before.
//! Requests within [`WINDOW`] of that relist are coalesced into one, made when the window ends;
//! any number of changes by any number of tenants cost one LIST per kind per window. Pure, with
//! the instant injected, so it is tested without a clock; the loop sleeps until
//! [`RelistThrottle::next`] and then takes [`RelistThrottle::due`].

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use kube_retention_common::kinds::KindId;
use tokio::time::Instant;

/// The shortest time between two relists of one kind that policy changes cause.
pub const WINDOW: Duration = Duration::from_secs(5);

/// When each kind (`K`: a kind, or a kind in a namespace) was last relisted, and which wait for
/// their window to end.
#[derive(Debug)]
pub struct RelistThrottle<K = KindId> {
    last: HashMap<K, Instant>,
    pending: HashMap<K, Instant>,
}

impl<K> Default for RelistThrottle<K> {
    fn default() -> Self {
        Self {
            last: HashMap::new(),
            pending: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> RelistThrottle<K> {
    /// A policy change asks to relist `kind` at `now`: `true` when it is to be done now;
    /// otherwise it is done once the window ends (one relist however many asked meanwhile).
    pub fn request(&mut self, kind: K, now: Instant) -> bool {
        if self.pending.contains_key(&kind) {
            return false;
        }
        match self.last.get(&kind) {
            Some(&last) if now < last + WINDOW => {
                self.pending.insert(kind, last + WINDOW);
                false
            }
            _ => {
                self.last.insert(kind, now);
                true
            }
        }
    }

    /// The kind's watch restarted for another reason (its watch mode changed): that listed it
    /// afresh too, and a relist pending for it is not needed any more.
    pub fn listed(&mut self, kind: K, now: Instant) {
        self.pending.remove(&kind);
        self.last.insert(kind, now);
    }

    /// When the next coalesced relist is due, if one waits.
    pub fn next(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }

    /// The kinds whose coalesced relist is due at `now`, taken out of waiting and recorded as
    /// relisted now.
    pub fn due(&mut self, now: Instant) -> Vec<K> {
        let due: Vec<K> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(kind, _)| kind.clone())
            .collect();
        for kind in &due {
            self.pending.remove(kind);
            self.last.insert(kind.clone(), now);
        }
        due
    }

    /// How many relists wait for their window to end.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}
