//! How a broken watch retries: 200 ms doubling to 2 s, each wait plus up to as much again of
//! jitter (so at most 4 s), reset by the next event — backon's exponential backoff through
//! kube-runtime's adapter, not a hand-rolled one. kube-runtime's default waits up to 30 s (plus
//! jitter), which after an API server outage would leave new objects unseen for that long; a
//! watch is one request, so retrying it often costs little, and the jitter keeps the watches of
//! many kinds (and of many replicas) from retrying in step.

use std::time::Duration;

use backon::ExponentialBuilder;
use kube::runtime::watcher::ExponentialBackoff;

/// The first wait, before jitter.
pub const FIRST: Duration = Duration::from_millis(200);
/// The longest wait, before jitter.
pub const LONGEST: Duration = Duration::from_secs(2);

/// A fresh backoff for one watch.
pub fn watch_backoff() -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(FIRST)
        .with_max_delay(LONGEST)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff;

    use super::*;

    /// Each wait lies between its base (200 ms doubling, at most 2 s) and twice that.
    fn within_bounds(waits: &[Duration]) -> bool {
        waits.iter().enumerate().all(|(index, wait)| {
            let base =
                (FIRST * 2u32.pow(u32::try_from(index).unwrap_or(u32::MAX).min(10))).min(LONGEST);
            *wait >= base && *wait < base * 2
        })
    }

    #[test]
    fn doubles_to_two_seconds_with_jitter_and_resets() {
        for _ in 0..100 {
            let mut backoff = watch_backoff();
            let waits: Vec<Duration> = backoff.by_ref().take(8).collect();
            assert!(within_bounds(&waits), "{waits:?}");
            assert!(waits.iter().all(|wait| *wait < Duration::from_secs(4)));
            backoff.reset();
            let first = backoff.next().unwrap_or_default();
            assert!(
                first >= FIRST && first < FIRST * 2,
                "{first:?} after a reset"
            );
        }
    }
}
