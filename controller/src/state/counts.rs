//! What the controller's gauges count, all in one pass over the records: runs tracked by kind,
//! those backing off, and the backlog of overdue ones.

use std::collections::HashMap;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, Registry};

use super::runs::Runs;
use super::stragglers::Stragglers;

/// One reading of the gauges.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Runs tracked, for every kind in the table (0 for a kind with none).
    pub tracked: HashMap<KindId, usize>,
    /// Tracked objects and stragglers whose last request failed and that wait to retry.
    pub in_backoff: usize,
    /// Past their deadline and not deleted yet: the backlog alerts watch.
    pub overdue: usize,
    /// Objects waiting for the managed label.
    pub stragglers: usize,
}

impl Gauges {
    /// Every gauge at `now`, in one pass over the records.
    pub(super) fn read(
        kinds: &Registry,
        runs: &Runs,
        stragglers: &Stragglers,
        now: Timestamp,
    ) -> Self {
        let mut gauges = Self {
            tracked: kinds.iter().map(|(id, _)| (id, 0)).collect(),
            ..Self::default()
        };
        for (key, record) in runs.iter() {
            *gauges.tracked.entry(key.kind).or_default() += 1;
            gauges.in_backoff += usize::from(record.failures > 0);
            gauges.overdue += usize::from(record.overdue(now));
        }
        gauges.in_backoff += stragglers.in_backoff();
        gauges.stragglers = stragglers.len();
        gauges
    }
}
