//! Where the loop reads the time. The state is judged at a wall-clock `now` (deadlines are wall
//! times written on objects), and the loop sleeps on tokio's clock until the next one. In
//! production both are the system's; in tests on paused tokio time ([`Clock::following_tokio`])
//! the wall clock advances with tokio's, so a deadline an hour away comes when tokio's virtual
//! hour has passed, in microseconds of real time, as in kube-runtime's scheduler tests.

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

    /// tokio's instant at which this clock reads `at` (now, for a time past).
    pub fn instant_at(&self, at: Timestamp) -> Instant {
        let wait = at.duration_since(self.now());
        Instant::now() + Duration::try_from(wait).unwrap_or(Duration::ZERO)
    }
}
