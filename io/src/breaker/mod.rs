//! The circuit breakers: one per namespace and one for the cluster ([`scopes`]). More DELETEs in
//! a namespace than `--circuit-breaker` allows within its window open that namespace's: from
//! then on none of its DELETEs is sent by anyone — the executor's (policies, annotations,
//! limits) or a Cleaner's — until an admin releases it, while every other namespace's go on.
//! More DELETEs across the cluster than `--cluster-circuit-breaker` allows open the cluster's,
//! which holds them all. Whatever made so many objects due at once (a script that annotated a
//! whole namespace, a policy approved without reading its count, a clock jump), the damage stops
//! at the limit, and one tenant's burst stops only that tenant.
//!
//! The state outlives the process: the leader writes a trip into a ConfigMap in its own
//! namespace ([`store`]: one for the cluster's breaker, one naming the namespaces whose breakers
//! are open), every replica watches them, and a controller that starts deletes nothing until it
//! has read them. Releasing is deleting the cluster's ConfigMap, or a namespace's key
//! (`kubectl retention breaker release [-n NAMESPACE]`): the count starts afresh, and the
//! deletions the breaker held go uncounted by it.
//!
//! Each DELETE asks [`Breaker::admit`] just before it is sent: the executor keeps the ones held
//! aside (its stamps and Events still go) and sends them on release; a Cleaner's clean waits.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::clock::Clock;

mod metrics;
pub mod scopes;
pub mod store;
mod window;

pub use metrics::{BreakerMetrics, ScopeLabels};
pub use scopes::{Breakers, Limit, MAX_COUNTED_NAMESPACES, Scope, Verdict};
pub use window::{Admission, BUCKETS, Cause, DeletionWindow, Position, Trip};

/// The breakers shared by everything that deletes; clones are the same breakers.
#[derive(Clone)]
pub struct Breaker {
    inner: Arc<Inner>,
}

struct Inner {
    breakers: Mutex<Breakers>,
    /// Changes with every breaker that opens or closes.
    changes: watch::Sender<u64>,
    clock: Clock,
}

impl Breaker {
    /// The cluster's breaker at `cluster`, each namespace's at `per_namespace`, timed by
    /// `clock`. Deletions wait until the stored state is known ([`Breaker::close`]), unless
    /// both are off.
    pub fn new(cluster: Limit, per_namespace: Limit, clock: Clock) -> Self {
        Self {
            inner: Arc::new(Inner {
                breakers: Mutex::new(Breakers::new(cluster, per_namespace)),
                changes: watch::Sender::new(0),
                clock,
            }),
        }
    }

    /// No breaker: every DELETE goes.
    pub fn off() -> Self {
        Self::new(Limit::OFF, Limit::OFF, Clock::System)
    }

    /// The clock the breakers' windows and trips are timed by.
    pub fn clock(&self) -> Clock {
        self.inner.clock
    }

    fn breakers(&self) -> MutexGuard<'_, Breakers> {
        self.inner
            .breakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells every subscriber that a breaker opened or closed.
    fn changed(&self) {
        self.inner.changes.send_modify(|version| *version += 1);
    }

    /// Whether a DELETE in `namespace` (empty: outside any) may be sent now; if so it is
    /// counted. A DELETE that may not is held by its sender ([`Breaker::hold`]) until
    /// [`Breaker::holds`] says otherwise.
    pub fn admit(&self, namespace: &str) -> bool {
        let clock = self.inner.clock;
        let verdict = self
            .breakers()
            .admit(namespace, clock.instant().into_std(), clock.now());
        match &verdict {
            Verdict::Go => return true,
            Verdict::Held(_) => return false,
            Verdict::Trips(Scope::Cluster, trip) => {
                tracing::error!(limit = trip.limit, window = ?trip.window, "circuit breaker open: {}", trip.message());
            }
            Verdict::Trips(Scope::Namespace(namespace), trip) => {
                tracing::error!(%namespace, limit = trip.limit, window = ?trip.window, "circuit breaker of a namespace open: {}", trip.message_in(namespace));
            }
        }
        self.changed();
        false
    }

    /// Admits a DELETE in `namespace`, waiting while a breaker holds it (or the stored state is
    /// not known yet).
    pub async fn admit_or_wait(&self, namespace: &str) {
        loop {
            let mut changes = self.subscribe();
            if self.admit(namespace) {
                return;
            }
            self.hold(namespace, 1);
            // Only an error when the breaker itself is gone, which it is not while `self` is.
            let released = changes.wait_for(|_| !self.holds(namespace));
            released.await.ok();
            self.held_went(namespace, 1);
        }
    }

    /// Whether a DELETE in `namespace` would be held now; nothing is counted.
    pub fn holds(&self, namespace: &str) -> bool {
        self.breakers().holds(namespace)
    }

    /// `count` more DELETEs of `namespace` wait for a breaker to close.
    pub fn hold(&self, namespace: &str, count: usize) {
        self.breakers().hold(namespace, count);
    }

    /// `count` DELETEs of `namespace` held no longer wait.
    pub fn held_went(&self, namespace: &str, count: usize) {
        self.breakers().held_went(namespace, count);
    }

    /// How many DELETEs wait for a breaker to close.
    pub fn waiting(&self) -> usize {
        self.breakers().waiting()
    }

    /// The stored state says the cluster's breaker is open.
    pub fn open(&self, trip: Trip) {
        self.breakers().open(trip);
        self.changed();
    }

    /// The stored state says the cluster's breaker is closed (and every namespace's open one has
    /// been read): a release if it was open.
    pub fn close(&self) {
        self.breakers().close();
        self.changed();
    }

    /// The stored state says `namespace`'s breaker is open.
    pub fn open_namespace(&self, namespace: &str, trip: Trip) {
        self.breakers().open_namespace(namespace, trip);
        self.changed();
    }

    /// The stored state says `namespace`'s breaker is closed: a release if it was open.
    pub fn close_namespace(&self, namespace: &str) {
        self.breakers().close_namespace(namespace);
        self.changed();
    }

    /// The cluster's breaker.
    pub fn position(&self) -> Position {
        self.breakers().position().clone()
    }

    /// `namespace`'s breaker: closed unless remembered otherwise.
    pub fn namespace_position(&self, namespace: &str) -> Position {
        let breakers = self.breakers();
        match breakers.namespace_position(namespace) {
            Some(position) => position.clone(),
            None => Position::Closed,
        }
    }

    /// The namespaces whose breaker is open, and why.
    pub fn namespace_trips(&self) -> Vec<(Arc<str>, Trip)> {
        self.breakers().namespace_trips()
    }

    /// How many namespaces' breakers are open.
    pub fn open_namespaces(&self) -> usize {
        self.breakers().open_namespaces()
    }

    /// A version that changes whenever a breaker opens or closes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }
}
