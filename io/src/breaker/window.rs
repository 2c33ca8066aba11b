//! One breaker's count, pure and clock-injected: the DELETEs sent within the last window, and
//! whether the breaker is closed (deletions go), open (none goes until released), or not known
//! yet (none goes until the stored state has been read: a controller restarted after a trip
//! must not delete before it has seen the trip). The cluster's breaker is one, and each
//! namespace's another ([`super::scopes`]).
//!
//! The count is kept in [`BUCKETS`] + 1 buckets of a [`BUCKETS`]th of the window each, not as a
//! time per DELETE: its memory is the same at a limit of ten or of a million, which is what
//! lets every namespace have one. A DELETE counts from its bucket until [`BUCKETS`] + 1 buckets
//! later: for at least the window and at most a [`BUCKETS`]th more, so no window ever sees more
//! than the limit go.

use std::time::{Duration, Instant};

use jiff::Timestamp;

/// Buckets per window.
pub const BUCKETS: u32 = 16;

/// The ring's length: the window's buckets and the one under way.
const RING: usize = BUCKETS as usize + 1;

/// Why a breaker opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// More than `limit` DELETEs within `window`.
    Deletions,
    /// A namespace went past its limit with [`MAX_OPEN_NAMESPACES`] namespaces' breakers open
    /// already: the cluster's breaker opened instead.
    ///
    /// [`MAX_OPEN_NAMESPACES`]: kube_retention_common::breaker::MAX_OPEN_NAMESPACES
    NamespacesOpen,
}

/// Why the breaker opened: more than `limit` DELETEs within `window`, at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    pub at: Timestamp,
    pub limit: u32,
    pub window: Duration,
    pub cause: Cause,
}

impl Trip {
    /// A trip of more than `limit` DELETEs within `window`, at `at`.
    pub fn of_deletions(at: Timestamp, limit: u32, window: Duration) -> Self {
        Self {
            at,
            limit,
            window,
            cause: Cause::Deletions,
        }
    }

    /// What the breaker's Event and ConfigMap say.
    pub fn message(&self) -> String {
        match self.cause {
            Cause::Deletions => format!(
                "more than {} deletions within {}: no deletion is sent until the breaker is \
                 released (kubectl retention breaker release)",
                self.limit,
                humantime::format_duration(self.window)
            ),
            Cause::NamespacesOpen => format!(
                "a namespace went past its limit with the breakers of {} namespaces open \
                 already: no deletion is sent until the breaker is released (kubectl retention \
                 breaker release), and the namespaces' too (kubectl retention breaker status \
                 lists them)",
                kube_retention_common::breaker::MAX_OPEN_NAMESPACES
            ),
        }
    }

    /// What a namespace's ConfigMap key says.
    pub fn message_in(&self, namespace: &str) -> String {
        format!(
            "more than {} deletions in namespace {namespace} within {}: none of its deletions is \
             sent until its breaker is released (kubectl retention breaker release -n \
             {namespace})",
            self.limit,
            humantime::format_duration(self.window)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// The stored state has not been read yet.
    Unknown,
    Closed,
    Open(Trip),
}

/// What a DELETE about to be sent is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send it; it is counted.
    Go,
    /// This one would have gone past the limit: the breaker opens now, and it waits.
    Trips(Trip),
    /// The breaker is open, or its state not known yet: it waits.
    Held,
}

/// DELETEs counted in buckets of a [`BUCKETS`]th of the window.
#[derive(Debug, Clone)]
struct Count {
    bucket: Duration,
    /// Set by the first DELETE counted: bucket numbers count from it.
    origin: Option<Instant>,
    /// The DELETEs of the buckets numbered `newest - RING + 1 ..= newest`, each at its number
    /// modulo [`RING`].
    ring: [u32; RING],
    newest: u64,
}

impl Count {
    fn new(window: Duration) -> Self {
        Self {
            bucket: (window / BUCKETS).max(Duration::from_nanos(1)),
            origin: None,
            ring: [0; RING],
            newest: 0,
        }
    }

    /// Moves the ring on to `now`'s bucket, emptying those it leaves behind; answers it.
    fn advance(&mut self, now: Instant) -> usize {
        let origin = *self.origin.get_or_insert(now);
        let elapsed = now.saturating_duration_since(origin).as_nanos();
        let number = u64::try_from(elapsed / self.bucket.as_nanos()).unwrap_or(u64::MAX);
        let passed = number.saturating_sub(self.newest);
        let emptied = usize::try_from(passed).unwrap_or(RING).min(RING);
        for step in 1..=emptied as u64 {
            self.ring[slot(self.newest + step)] = 0;
        }
        self.newest = self.newest.max(number);
        slot(self.newest)
    }

    /// DELETEs counted now.
    fn total(&mut self, now: Instant) -> u64 {
        self.advance(now);
        self.ring.iter().map(|&count| u64::from(count)).sum()
    }

    fn add(&mut self, now: Instant) {
        let slot = self.advance(now);
        self.ring[slot] = self.ring[slot].saturating_add(1);
    }

    fn clear(&mut self) {
        self.ring = [0; RING];
    }
}

fn slot(number: u64) -> usize {
    (number % RING as u64) as usize
}

#[derive(Debug, Clone)]
pub struct DeletionWindow {
    /// 0: no breaker.
    limit: u32,
    window: Duration,
    count: Count,
    position: Position,
    /// DELETEs a release lets through uncounted: those it found waiting.
    released: usize,
}

impl DeletionWindow {
    /// A breaker opening past `limit` DELETEs within `window` (0: never), starting `position`.
    pub fn new(limit: u32, window: Duration, position: Position) -> Self {
        Self {
            limit,
            window,
            count: Count::new(window),
            position,
            released: 0,
        }
    }

    pub fn position(&self) -> &Position {
        &self.position
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Whether a DELETE would be held now: open, or not known yet.
    pub fn holds(&self) -> bool {
        !matches!(self.position, Position::Closed)
    }

    /// Whether a DELETE at `now` is within the limit (or let through by a release): nothing is
    /// counted or changed but the buckets `now` leaves behind.
    pub fn has_room(&mut self, now: Instant) -> bool {
        self.limit == 0 || self.released > 0 || self.count.total(now) < u64::from(self.limit)
    }

    /// Counts a DELETE sent at `now` (uncounted if a release let it through).
    pub fn count(&mut self, now: Instant) {
        if self.limit == 0 {
            return;
        }
        match self.released {
            0 => self.count.add(now),
            _ => self.released -= 1,
        }
    }

    /// Opens the breaker at `wall`: the DELETE about to go would have gone past its limit.
    pub fn trip(&mut self, wall: Timestamp) -> Trip {
        let trip = Trip::of_deletions(wall, self.limit, self.window);
        self.position = Position::Open(trip);
        trip
    }

    /// A DELETE is about to be sent at `now` (`wall` on the wall clock).
    pub fn admit(&mut self, now: Instant, wall: Timestamp) -> Admission {
        if self.holds() {
            return Admission::Held;
        }
        if !self.has_room(now) {
            return Admission::Trips(self.trip(wall));
        }
        self.count(now);
        Admission::Go
    }

    /// The stored state says the breaker is open (a trip before a restart, another replica's,
    /// or, for the cluster's, too many namespaces').
    pub fn open(&mut self, trip: Trip) {
        if self.limit > 0 || trip.cause == Cause::NamespacesOpen {
            self.position = Position::Open(trip);
        }
    }

    /// The stored state says it is closed: from an unknown state deletions simply go; an open
    /// breaker is released, the count starts afresh, and the `waiting` DELETEs it held go
    /// uncounted (the release is the admin saying they are meant).
    pub fn close(&mut self, waiting: usize) {
        if matches!(self.position, Position::Open(_)) {
            self.count.clear();
            self.released = waiting;
        }
        self.position = Position::Closed;
    }

    /// Whether this window remembers nothing at `now`: closed, nothing counted, no release
    /// pending. A namespace's is then forgotten.
    pub fn is_idle(&mut self, now: Instant) -> bool {
        self.position == Position::Closed && self.released == 0 && self.count.total(now) == 0
    }
}
