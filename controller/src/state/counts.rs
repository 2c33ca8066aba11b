//! What the controller's gauges count, all in one pass over the records: runs tracked by kind,
//! those backing off, and the backlog of overdue ones.

use super::*;

/// One reading of the gauges.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Runs tracked, for every kind in the table (0 for a kind with none).
    pub tracked: HashMap<KindId, usize>,
    /// Tracked objects and stragglers whose last request failed and that wait to retry.
    pub in_backoff: usize,
    /// Past their deadline and not deleted yet: the backlog alerts watch.
    pub overdue: usize,
}

impl State {
    /// How many runs of `kind` are tracked.
    pub fn tracked(&self, kind: KindId) -> usize {
        self.runs.keys().filter(|key| key.kind == kind).count()
    }

    /// Every gauge, in one pass over the records.
    pub fn gauges(&self, now: Timestamp) -> Gauges {
        let mut gauges = Gauges {
            tracked: self.kinds.iter().map(|(id, _)| (id, 0)).collect(),
            ..Gauges::default()
        };
        for (key, record) in &self.runs {
            *gauges.tracked.entry(key.kind).or_default() += 1;
            gauges.in_backoff += usize::from(record.failures > 0);
            gauges.overdue += usize::from(record.overdue(now));
        }
        gauges.in_backoff += self
            .stragglers
            .values()
            .filter(|straggler| straggler.failures > 0)
            .count();
        gauges
    }

    /// How many runs are past their deadline and not deleted yet.
    pub fn overdue(&self, now: Timestamp) -> usize {
        self.gauges(now).overdue
    }
}
