//! The circuit breaker's count, pure and clock-injected: the DELETEs sent within the last window,
//! and whether the breaker is closed (deletions go), open (none goes until released), or not
//! known yet (none goes until the stored state has been read: a controller restarted after a trip
//! must not delete before it has seen the trip).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use jiff::Timestamp;

/// Why the breaker opened: more than `limit` DELETEs within `window`, at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    pub at: Timestamp,
    pub limit: u32,
    pub window: Duration,
}

impl Trip {
    /// What the breaker's Event and ConfigMap say.
    pub fn message(&self) -> String {
        format!(
            "more than {} deletions within {}: no deletion is sent until the breaker is released \
             (kubectl retention breaker release)",
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

#[derive(Debug)]
pub struct DeletionWindow {
    /// 0: no breaker.
    limit: u32,
    window: Duration,
    sent: VecDeque<Instant>,
    position: Position,
    /// DELETEs a release lets through uncounted: those it found waiting.
    released: usize,
}

impl DeletionWindow {
    /// A breaker opening past `limit` DELETEs within `window` (0: never), starting `position`.
    pub fn new(limit: u32, window: Duration, position: Position) -> Self {
        let position = match limit {
            0 => Position::Closed,
            _ => position,
        };
        Self {
            limit,
            window,
            sent: VecDeque::new(),
            position,
            released: 0,
        }
    }

    pub fn position(&self) -> &Position {
        &self.position
    }

    /// A DELETE is about to be sent at `now` (`wall` on the wall clock).
    pub fn admit(&mut self, now: Instant, wall: Timestamp) -> Admission {
        match &self.position {
            Position::Unknown | Position::Open(_) => return Admission::Held,
            Position::Closed if self.limit == 0 => return Admission::Go,
            Position::Closed => {}
        }
        if self.released > 0 {
            self.released -= 1;
            return Admission::Go;
        }
        while let Some(&oldest) = self.sent.front() {
            match now.saturating_duration_since(oldest) >= self.window {
                true => self.sent.pop_front(),
                false => break,
            };
        }
        if self.sent.len() >= usize::try_from(self.limit).unwrap_or(usize::MAX) {
            let trip = Trip {
                at: wall,
                limit: self.limit,
                window: self.window,
            };
            self.position = Position::Open(trip);
            return Admission::Trips(trip);
        }
        self.sent.push_back(now);
        Admission::Go
    }

    /// The stored state says the breaker is open (a trip before a restart, or another replica's).
    pub fn open(&mut self, trip: Trip) {
        if self.limit > 0 {
            self.position = Position::Open(trip);
        }
    }

    /// The stored state says it is closed: from an unknown state deletions simply go; an open
    /// breaker is released, the count starts afresh, and the `waiting` DELETEs it held go
    /// uncounted (the release is the admin saying they are meant).
    pub fn close(&mut self, waiting: usize) {
        if matches!(self.position, Position::Open(_)) {
            self.sent.clear();
            self.released = waiting;
        }
        self.position = Position::Closed;
    }
}
