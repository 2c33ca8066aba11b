//! The memory admissions hold, as one hard budget of bytes (`--max-admission-memory`): every
//! body while it arrives and until it is decoded, and every review's decoded parts until it is
//! answered ([`crate::review::lean`] charges them as it builds them). Nothing is kept before it
//! is charged, so the sum never passes the budget, whatever the requests are.
//!
//! A full budget must not let slow or many bodies refuse the API server's reviews. A body the
//! API server sends arrives whole within milliseconds; one held open costs its sender nothing
//! but the bytes it has sent. So a charge that does not fit cuts off the bodies that have been
//! arriving slowest, until it fits: the body with the fewest bytes per second since its first
//! (the oldest of equals) goes first, so a body held open loses to one sent at the network's
//! speed, and bodies arriving side by side at that speed (an HTTP/2 connection's streams) are
//! left to finish. Their bytes are freed at once (the buffer is taken from them here, not when
//! their task next runs), their requests answered 503 and counted
//! (`admission_bodies_cut_off_total`). Bodies already whole, and reviews being answered,
//! are never cut: they finish within the admission's deadline. A charge that still does not fit
//! is refused, and its request with it (503, the API server then applies the registration's
//! failurePolicy). To take the budget from the API server's reviews, then, a sender would have
//! to keep it filled with bodies arriving as fast as theirs, which is sending the whole budget
//! again every few milliseconds (each body must end within the admission's deadline anyway).
//!
//! Hand-written: a semaphore (tokio's, or a crate's) counts bytes but cannot take them back
//! from a holder, which is what lets a fresh review in.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

use crate::review::lean::{Account, Exceeded};

/// The default budget: room for a dozen UPDATEs of objects as large as etcd stores (two of
/// 1.5 MiB each) arriving at once, with the webhook within the chart's 128 MiB whatever
/// arrives: the campaign's slow bodies from two hundred connections peaked at 114–124 MiB
/// with 48 MiB (the budget, the connections' buffers, and the allocator's pages freed but not
/// yet returned to the system).
pub const DEFAULT_CAPACITY: usize = 40 * 1024 * 1024;

/// The bytes every admission holds, shared.
pub struct Memory {
    capacity: usize,
    state: Mutex<State>,
    held: Gauge,
    cut_off: Counter,
}

#[derive(Default)]
struct State {
    used: usize,
    next: u64,
    /// The bodies still arriving, by arrival (the oldest first).
    arriving: BTreeMap<u64, Arriving>,
}

/// A body still arriving: what it holds, since when, and its buffer, which a cut takes away.
struct Arriving {
    held: usize,
    since: std::time::Instant,
    body: Arc<Body>,
}

impl Arriving {
    /// Bytes per second since its first, the millisecond its least measure.
    fn rate(&self, now: std::time::Instant) -> f64 {
        let elapsed = now.duration_since(self.since).as_secs_f64().max(0.001);
        self.held as f64 / elapsed
    }
}

/// The buffer of a body still arriving; `None` once it has been cut off.
pub struct Body {
    bytes: Mutex<Option<Vec<u8>>>,
    cut: Notify,
}

impl Memory {
    /// A budget of `capacity` bytes, its use shown by `held` and its cuts counted by `cut_off`.
    pub fn new(capacity: usize, held: Gauge, cut_off: Counter) -> Self {
        Self {
            capacity,
            state: Mutex::new(State::default()),
            held,
            cut_off,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes held now.
    pub fn used(&self) -> usize {
        self.lock().used
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned lock still holds consistent counts.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A body starting to arrive, holding nothing yet.
    pub fn arriving(self: &Arc<Self>) -> Incoming {
        let body = Arc::new(Body {
            bytes: Mutex::new(Some(Vec::new())),
            cut: Notify::new(),
        });
        let mut state = self.lock();
        let id = state.next;
        state.next += 1;
        state.arriving.insert(
            id,
            Arriving {
                held: 0,
                since: std::time::Instant::now(),
                body: body.clone(),
            },
        );
        Incoming {
            memory: self.clone(),
            id,
            body,
        }
    }

    /// Holding nothing yet, never cut off: a review's decoded parts.
    pub fn hold(self: &Arc<Self>) -> Held {
        Held {
            memory: self.clone(),
            bytes: 0,
        }
    }

    /// Takes `bytes` more for `holder` (`Some`: a body arriving, never cut to make room for
    /// itself), cutting off the slowest bodies still arriving where they do not fit.
    fn take(&self, bytes: usize, holder: Option<u64>) -> Result<(), Refused> {
        let mut state = self.lock();
        if let Some(holder) = holder
            && !state.arriving.contains_key(&holder)
        {
            return Err(Refused::CutOff);
        }
        let now = std::time::Instant::now();
        while state.used + bytes > self.capacity {
            // The slowest; of equals, the first (the map is in arrival order).
            let slowest = state
                .arriving
                .iter()
                .filter(|&(&id, arriving)| Some(id) != holder && arriving.held > 0)
                .fold(None, |slowest: Option<(u64, f64)>, (&id, arriving)| {
                    let rate = arriving.rate(now);
                    match slowest {
                        Some((_, least)) if least <= rate => slowest,
                        _ => Some((id, rate)),
                    }
                })
                .map(|(id, _)| id);
            let Some(slowest) = slowest else {
                return Err(Refused::Full(Exceeded::Shared {
                    capacity: self.capacity,
                }));
            };
            let cut = state.arriving.remove(&slowest).expect("found above");
            state.used -= cut.held;
            // Freed now, under the lock: the room is real before anyone takes it.
            drop(cut.body.take());
            cut.body.cut.notify_one();
            self.cut_off.inc();
        }
        state.used += bytes;
        if let Some(holder) = holder
            && let Some(arriving) = state.arriving.get_mut(&holder)
        {
            arriving.held += bytes;
        }
        self.held.set(gauge(state.used));
        Ok(())
    }

    /// Gives back `bytes` of what the body `holder` holds, if it is still arriving (a cut
    /// gave back all it held).
    fn release(&self, bytes: usize, holder: u64) {
        let mut state = self.lock();
        if let Some(arriving) = state.arriving.get_mut(&holder) {
            arriving.held -= bytes;
            state.used -= bytes;
            self.held.set(gauge(state.used));
        }
    }

    fn give_back(&self, bytes: usize) {
        let mut state = self.lock();
        state.used -= bytes;
        self.held.set(gauge(state.used));
    }
}

fn gauge(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl Body {
    fn lock(&self) -> MutexGuard<'_, Option<Vec<u8>>> {
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> Option<Vec<u8>> {
        self.lock().take()
    }
}

/// A body arriving: its chunks are charged, then appended; it may be cut off meanwhile.
pub struct Incoming {
    memory: Arc<Memory>,
    id: u64,
    body: Arc<Body>,
}

/// The body was cut off to make room for younger ones, or did not fit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("cut off to make room for reviews that arrived faster")]
    CutOff,
    #[error(transparent)]
    Full(#[from] Exceeded),
}

impl Incoming {
    /// Appends `chunk`, charging the room the buffer grows by (at most `limit` in all: the
    /// body's declared or largest length), before it grows.
    pub fn append(&mut self, chunk: &[u8], limit: usize) -> Result<(), Refused> {
        let capacity = match self.body.lock().as_ref() {
            None => return Err(Refused::CutOff),
            Some(bytes) if bytes.capacity() - bytes.len() >= chunk.len() => None,
            Some(bytes) => {
                let needed = bytes.len() + chunk.len();
                let doubled = bytes.capacity().saturating_mul(2).max(64 * 1024);
                Some((bytes.capacity(), doubled.min(limit.max(needed)).max(needed)))
            }
        };
        if let Some((now, grown)) = capacity {
            // Growing copies into a new buffer before the old one is freed: both are held
            // until then.
            self.memory.take(grown, Some(self.id))?;
            let grew = {
                let mut bytes = self.body.lock();
                bytes
                    .as_mut()
                    .map(|bytes| bytes.reserve_exact(grown - bytes.len()))
            };
            self.memory.release(now, self.id);
            grew.ok_or(Refused::CutOff)?;
        }
        let mut bytes = self.body.lock();
        let bytes = bytes.as_mut().ok_or(Refused::CutOff)?;
        bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// Resolves once this body has been cut off.
    pub async fn cut_off(&self) {
        loop {
            if self.body.lock().is_none() {
                return;
            }
            self.body.cut.notified().await;
        }
    }

    /// The whole body, held (never cut off now) until the [`Held`] is dropped.
    pub fn finish(self) -> Result<(Vec<u8>, Held), Refused> {
        let mut state = self.memory.lock();
        let Some(arriving) = state.arriving.remove(&self.id) else {
            return Err(Refused::CutOff);
        };
        drop(state);
        let bytes = self.body.take().ok_or(Refused::CutOff)?;
        let held = Held {
            memory: self.memory.clone(),
            bytes: arriving.held,
        };
        // `self` is dropped with nothing left to give back.
        Ok((bytes, held))
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let mut state = self.memory.lock();
        if let Some(arriving) = state.arriving.remove(&self.id) {
            state.used -= arriving.held;
            self.memory.held.set(gauge(state.used));
        }
    }
}

/// Bytes held until dropped, never cut off.
pub struct Held {
    memory: Arc<Memory>,
    bytes: usize,
}

impl Held {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Account for Held {
    fn take(&mut self, bytes: usize) -> Result<(), Exceeded> {
        self.memory
            .take(bytes, None)
            .map_err(|refused| match refused {
                Refused::Full(exceeded) => exceeded,
                // Only a body arriving is cut off.
                Refused::CutOff => Exceeded::Shared {
                    capacity: self.memory.capacity,
                },
            })?;
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.memory.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(capacity: usize) -> (Arc<Memory>, Counter) {
        let cut_off = Counter::default();
        let memory = Arc::new(Memory::new(capacity, Gauge::default(), cut_off.clone()));
        (memory, cut_off)
    }

    #[test]
    fn a_body_is_charged_for_its_buffer_before_it_grows() {
        let (memory, _) = memory(1 << 20);
        let mut body = memory.arriving();
        body.append(b"abc", 100).unwrap();
        assert_eq!(memory.used(), 100, "grown to its limit at once when small");
        let (bytes, held) = body.finish().unwrap();
        assert_eq!(bytes, b"abc");
        assert_eq!(held.bytes(), 100);
        drop(held);
        assert_eq!(memory.used(), 0);
    }

    #[test]
    fn the_slowest_body_arriving_is_cut_off_for_another() {
        let (memory, cut_off) = memory(100 * 1024);
        let mut old = memory.arriving();
        old.append(&[1; 10], 128 * 1024).unwrap();
        let mut young = memory.arriving();
        young.append(&[2; 10], 128 * 1024).unwrap();
        assert_eq!(cut_off.get(), 1);
        assert_eq!(memory.used(), 64 * 1024, "the old body's bytes are free");
        assert_eq!(old.append(&[1], 128 * 1024), Err(Refused::CutOff));
        assert!(old.finish().is_err());
        assert_eq!(young.finish().unwrap().0, [2; 10]);
    }

    #[test]
    fn a_body_held_open_loses_to_one_arriving_fast() {
        let (memory, cut_off) = memory(150 * 1024);
        let mut slow = memory.arriving();
        slow.append(&[1; 10], 128 * 1024).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut fast = memory.arriving();
        fast.append(&[2; 10], 128 * 1024).unwrap();
        let mut third = memory.arriving();
        third.append(&[3; 10], 128 * 1024).unwrap();
        assert_eq!(cut_off.get(), 1);
        assert_eq!(slow.append(&[1], 128 * 1024), Err(Refused::CutOff));
        assert_eq!(fast.finish().unwrap().0, [2; 10]);
    }

    #[test]
    fn whole_bodies_and_decoded_reviews_are_never_cut_off() {
        let (memory, cut_off) = memory(100 * 1024);
        let mut whole = memory.arriving();
        whole.append(&[1; 10], 64 * 1024).unwrap();
        let (_, _held) = whole.finish().unwrap();
        let mut decoded = memory.hold();
        assert_eq!(
            decoded.take(64 * 1024),
            Err(Exceeded::Shared {
                capacity: 100 * 1024
            })
        );
        let mut arriving = memory.arriving();
        assert_eq!(
            arriving.append(&[1; 10], 64 * 1024),
            Err(Refused::Full(Exceeded::Shared {
                capacity: 100 * 1024
            }))
        );
        assert_eq!(cut_off.get(), 0);
        assert_eq!(memory.used(), 64 * 1024);
    }

    #[test]
    fn a_decoded_review_cuts_off_bodies_arriving() {
        let (memory, cut_off) = memory(100 * 1024);
        let mut arriving = memory.arriving();
        arriving.append(&[1; 10], 64 * 1024).unwrap();
        let mut decoded = memory.hold();
        decoded.take(64 * 1024).unwrap();
        assert_eq!(cut_off.get(), 1);
        drop(arriving);
        drop(decoded);
        assert_eq!(memory.used(), 0, "nothing given back twice");
    }
}
