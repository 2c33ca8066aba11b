//! The bounds on admission work: a deadline for each request, from its first byte to its
//! answer; a bound on the reviews being answered at once; and a bound on what admission may
//! decode of one review. The API server gives up on a webhook after the registrations'
//! `timeoutSeconds` (3 s) and then applies their `failurePolicy`; the webhook answers first,
//! well within that, and says what happened, never leaving the API server to time out.
//!
//! A review takes its place among those answered once its body has arrived whole, never
//! before: a body that trickles in holds no place, only the bytes it has sent, which the
//! memory budget bounds and takes back from the slowest ([`crate::memory`]). Beyond
//! [`Limits::max_in_flight`] a review is refused unjudged (503), so a flood queues nothing:
//! the API server applies the registration's `failurePolicy` to it, as to an absent webhook.
//! CEL compilation has a bound of its own ([`crate::compilations`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// How long a request may take, from its first byte to its answer: well within the
/// registrations' `timeoutSeconds` (3), leaving the API server a second for the network.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// How many reviews may be answered at once: far above what the API server's admission
/// traffic keeps in flight (a review takes milliseconds). Their memory has its own bound
/// ([`crate::memory`]).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;

/// The most admission keeps of one review once decoded ([`crate::review::lean`]'s charge).
/// What it reads of an object the API server sends is a few kilobytes; of a policy or a
/// Cleaner, whose lists and texts their CRD bounds, tens. At 4 MiB, eight reviews dense with
/// what admission reads, and mutation's copy of each, took the webhook past 128 MiB in the
/// campaign's long run.
pub const DEFAULT_DECODED_PER_REVIEW: usize = 1024 * 1024;

/// The deadline and the in-flight bound, shared by every request.
#[derive(Clone)]
pub struct Limits {
    pub timeout: Duration,
    pub max_in_flight: usize,
    /// The most one review's decoded parts may take ([`DEFAULT_DECODED_PER_REVIEW`]).
    pub decoded_per_review: usize,
    in_flight: Arc<Semaphore>,
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(DEFAULT_TIMEOUT, DEFAULT_MAX_IN_FLIGHT)
    }
}

impl Limits {
    pub fn new(timeout: Duration, max_in_flight: usize) -> Self {
        Self {
            timeout,
            max_in_flight,
            decoded_per_review: DEFAULT_DECODED_PER_REVIEW,
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
        }
    }

    /// With one review's decoded parts bounded by `bytes`.
    pub fn decoding_at_most(self, bytes: usize) -> Self {
        Self {
            decoded_per_review: bytes,
            ..self
        }
    }

    /// A place among the reviews being answered, counted in `metrics` while it is held; `None`
    /// when all are taken.
    pub fn enter(&self, metrics: &Metrics) -> Option<InFlight> {
        let permit = self.in_flight.clone().try_acquire_owned().ok()?;
        metrics.admissions_in_flight.inc();
        Some(InFlight {
            _permit: permit,
            metrics: metrics.clone(),
        })
    }

    /// The requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.max_in_flight - self.in_flight.available_permits()
    }
}

/// A request's place in flight, given back when it is answered or dropped.
pub struct InFlight {
    _permit: OwnedSemaphorePermit,
    metrics: Metrics,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.metrics.admissions_in_flight.dec();
    }
}
