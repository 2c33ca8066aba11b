//! The cluster-wide circuit breaker. More DELETEs than `--circuit-breaker` allows within its
//! window open it: from then on no DELETE is sent by anyone — the executor's
//! (policies, annotations, limits) or a Cleaner's — until an admin releases it. Whatever made so
//! many objects due at once (a script that annotated a whole namespace, a policy approved
//! without reading its count, a clock jump), the damage stops at the limit.
//!
//! The state outlives the process: the leader writes a trip into a ConfigMap in its own
//! namespace ([`store`]), every replica watches it, and a controller that starts deletes nothing
//! until it has read it. Releasing is deleting that ConfigMap (`kubectl retention breaker
//! release`): the count starts afresh, and the deletions the breaker held go uncounted.
//!
//! Each DELETE asks [`Breaker::admit`] just before it is sent: the executor keeps the ones held
//! aside (its stamps and Events still go) and sends them on release; a Cleaner's clean waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;

mod metrics;
pub mod store;
mod window;

pub use metrics::BreakerMetrics;
pub use window::{Admission, DeletionWindow, Position, Trip};

/// The breaker shared by everything that deletes; clones are the same breaker.
#[derive(Clone)]
pub struct Breaker {
    inner: Arc<Inner>,
}

struct Inner {
    window: Mutex<DeletionWindow>,
    position: watch::Sender<Position>,
    /// DELETEs held, waiting for a release.
    waiting: AtomicUsize,
    clock: Clock,
}

impl Breaker {
    /// Opens past `limit` DELETEs within `window` (0: never), timed by `clock`. Deletions wait
    /// until the stored state is known ([`Breaker::close`] or [`Breaker::open`]).
    pub fn new(limit: u32, window: Duration, clock: Clock) -> Self {
        let window = DeletionWindow::new(limit, window, Position::Unknown);
        let position = window.position().clone();
        Self {
            inner: Arc::new(Inner {
                window: Mutex::new(window),
                position: watch::Sender::new(position),
                waiting: AtomicUsize::new(0),
                clock,
            }),
        }
    }

    /// No breaker: every DELETE goes.
    pub fn off() -> Self {
        Self::new(0, Duration::ZERO, Clock::System)
    }

    /// The clock the breaker's window and trips are timed by.
    pub fn clock(&self) -> Clock {
        self.inner.clock
    }

    fn window(&self) -> MutexGuard<'_, DeletionWindow> {
        self.inner
            .window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, window: &DeletionWindow) {
        let position = window.position().clone();
        self.inner.position.send_if_modified(|current| {
            let changed = *current != position;
            *current = position;
            changed
        });
    }

    /// Whether a DELETE may be sent now; if so it is counted. A DELETE that may not is held by
    /// its sender ([`Breaker::hold`]) until the breaker closes.
    pub fn admit(&self) -> bool {
        let mut window = self.window();
        let clock = self.inner.clock;
        let admission = window.admit(clock.instant().into_std(), clock.now());
        if let Admission::Trips(trip) = &admission {
            tracing::error!(limit = trip.limit, window = ?trip.window, "circuit breaker open: {}", trip.message());
        }
        self.publish(&window);
        admission == Admission::Go
    }

    /// Admits a DELETE, waiting while the breaker is open (or not known yet).
    pub async fn admit_or_wait(&self) {
        loop {
            if self.admit() {
                return;
            }
            let mut position = self.subscribe();
            self.hold(1);
            // Only an error when the breaker itself is gone, which it is not while `self` is.
            let closed = position.wait_for(|position| *position == Position::Closed);
            closed.await.ok();
            self.held_went(1);
        }
    }

    /// `count` more DELETEs wait for the breaker to close.
    pub fn hold(&self, count: usize) {
        self.inner.waiting.fetch_add(count, Ordering::Relaxed);
    }

    /// `count` DELETEs held no longer wait.
    pub fn held_went(&self, count: usize) {
        self.inner.waiting.fetch_sub(count, Ordering::Relaxed);
    }

    /// How many DELETEs wait for the breaker to close.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::Relaxed)
    }

    /// The stored state says open.
    pub fn open(&self, trip: Trip) {
        let mut window = self.window();
        window.open(trip);
        self.publish(&window);
    }

    /// The stored state says closed: a release if it was open.
    pub fn close(&self) {
        let mut window = self.window();
        window.close(self.waiting());
        self.publish(&window);
    }

    pub fn position(&self) -> Position {
        self.inner.position.borrow().clone()
    }

    /// The breaker's position as it changes.
    pub fn subscribe(&self) -> watch::Receiver<Position> {
        self.inner.position.subscribe()
    }
}
