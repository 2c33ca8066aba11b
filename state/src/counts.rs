//! What the controller's gauges count, all in one pass over the records: runs tracked by kind,
//! those backing off, the backlog of overdue ones, and what the blast-radius guard holds.

use std::collections::HashMap;

use jiff::Timestamp;
use kube_retention_common::kinds::KindId;

use super::State;

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
    /// Deletions the blast-radius guard holds back, and the policies awaiting approval.
    pub held: usize,
    pub awaiting_approval: usize,
    /// Runs left out for room, or let go of for another namespace's, since the start
    /// (`--max-tracked-objects`).
    pub left_out: u64,
    /// The namespace holding the most tracked runs, and how many: the one that goes without at
    /// the bound.
    pub heaviest: Option<(std::sync::Arc<str>, usize)>,
}

impl Gauges {
    /// Every gauge at `now`, in one pass over the records.
    pub(super) fn of(state: &State, now: Timestamp) -> Self {
        let (kinds, runs) = (&state.kinds, &state.tracker.runs);
        let (stragglers, guards) = (&state.stragglers, &state.guards);
        let mut gauges = Self {
            tracked: kinds.iter().map(|(id, _)| (id, 0)).collect(),
            ..Self::default()
        };
        // Held deletions are looked up only where there are any: a backlog of 100,000 overdue
        // objects would otherwise cost a lookup per policy each.
        let (held, awaiting) = guards.totals();
        for (key, record) in runs.iter() {
            *gauges.tracked.entry(key.kind).or_default() += 1;
            gauges.in_backoff += usize::from(record.failures > 0);
            // Held by the guard is not behind: it waits for approval, not for the controller.
            let overdue = record.overdue(now) && (held == 0 || !guards.is_held(key));
            gauges.overdue += usize::from(overdue);
        }
        gauges.in_backoff += stragglers.in_backoff();
        gauges.stragglers = stragglers.len();
        gauges.left_out = runs.room().left_out_total();
        gauges.heaviest = runs.room().heaviest();
        (gauges.held, gauges.awaiting_approval) = (held, awaiting);
        gauges
    }
}
