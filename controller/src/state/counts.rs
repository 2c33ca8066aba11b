//! What the controller's gauges count, each in one pass over the records: runs tracked by kind
//! and the backlog of overdue ones.

use super::*;

impl State {
    /// How many runs of `kind` are tracked.
    pub fn tracked(&self, kind: KindId) -> usize {
        self.runs.keys().filter(|key| key.kind == kind).count()
    }

    /// How many runs of each kind are tracked, in one pass (every kind in the table).
    pub fn tracked_by_kind(&self) -> HashMap<KindId, usize> {
        let mut counts: HashMap<KindId, usize> = self.kinds.iter().map(|(id, _)| (id, 0)).collect();
        for key in self.runs.keys() {
            *counts.entry(key.kind).or_default() += 1;
        }
        counts
    }

    /// How many runs are past their deadline and not deleted yet: the backlog alerts watch.
    pub fn overdue(&self, now: Timestamp) -> usize {
        self.runs
            .values()
            .filter(|record| record.overdue(now))
            .count()
    }
}
