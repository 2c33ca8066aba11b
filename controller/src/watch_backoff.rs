//! How a broken watch retries: 250 ms doubling to 4 s, reset by the next event. kube-runtime's
//! default waits up to 30 s, which after an API server outage would leave new objects unseen for
//! that long; a watch is one request, so retrying it often costs little.

use std::time::Duration;

use kube::runtime::utils::Backoff;

#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MAX: Duration = Duration::from_secs(4);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (current * 2).min(Self::MAX);
        Some(current)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_four_seconds_and_resets() {
        let mut backoff = WatchBackoff::default();
        let waits: Vec<u128> = backoff
            .by_ref()
            .take(7)
            .map(|wait| wait.as_millis())
            .collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000, 4000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(250)));
    }
}
