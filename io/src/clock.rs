//! Where the controller reads the time: the one clock every part is given (the loop, the
//! executor, the breaker, the leader lease, the policies' status, the Cleaners); nothing else
//! reads the system's. The state is judged at a wall-clock `now` (deadlines are wall times
//! written on objects), and the parts sleep on tokio's clock until the next one. In production
//! both are the system's; in tests on paused tokio time ([`Clock::following_tokio`]) the wall
//! clock advances with tokio's, so a deadline an hour away comes when tokio's virtual hour has
//! passed, in microseconds of real time, as in kube-runtime's scheduler tests.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// The system's clock.
    System,
    /// `start` at tokio's `at`, advancing with tokio's clock.
    FollowingTokio { start: Timestamp, at: Instant },
}

impl Clock {
    /// A clock that reads `start` now and advances with tokio's (paused) clock.
    pub fn following_tokio(start: Timestamp) -> Self {
        Self::FollowingTokio {
            start,
            at: Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Self::System => Timestamp::now(),
            Self::FollowingTokio { start, at } => {
                let elapsed = SignedDuration::try_from(at.elapsed()).unwrap_or(SignedDuration::MAX);
                start.saturating_add(elapsed).unwrap_or(*start)
            }
        }
    }

    /// tokio's instant now: the monotonic clock that windows and intervals are measured on,
    /// paused with tokio's in tests.
    pub fn instant(&self) -> Instant {
        Instant::now()
    }

    /// How long until this clock reads `at` (zero, for a time past).
    pub fn until(&self, at: Timestamp) -> Duration {
        Duration::try_from(self.now().duration_until(at)).unwrap_or(Duration::ZERO)
    }

    /// tokio's instant at which this clock reads `at` (now, for a time past).
    pub fn instant_at(&self, at: Timestamp) -> Instant {
        Instant::now() + self.until(at)
    }
}
