//! kube-retention's goals at scale, each said met or not from the envelope's own figures.

use super::{Figures, seconds};
use crate::deleters::Deleter;
use crate::mib;

/// kube-retention's memory goal at this size, the listing peak included, in MiB.
const MEMORY_GOAL_MIB: f64 = 300.0;
/// The first overdue deletion after a cold start, in seconds.
const FIRST_DELETION_GOAL: f64 = 3.0;
/// How much slower than the budget's pace the catch-up may be and still be "at" it.
const PACE_SLACK: f64 = 1.1;

fn met(holds: bool) -> &'static str {
    if holds { "**met**" } else { "**not met**" }
}

/// Each goal, met or not, from kube-retention's figures.
pub(super) fn verdicts(figures: &Figures) -> String {
    let Some((_, ours)) = figures
        .cold_starts
        .iter()
        .find(|(deleter, _)| *deleter == Deleter::KubeRetention)
    else {
        return "kube-retention's cold start did not run.".to_owned();
    };
    let peak = figures
        .tracking
        .iter()
        .filter(|reading| reading.deleter == Deleter::KubeRetention)
        .map(|reading| reading.peak_kib)
        .chain([ours.peak_rss_kib])
        .max()
        .map_or(f64::NAN, mib);
    let first = ours.first_deletion.unwrap_or(f64::INFINITY);
    let all_deleted = ours.deleted == figures.size.tenth();
    let last = ours.last_deletion.unwrap_or(f64::INFINITY);
    let pace = figures.size.at_budget_pace();
    format!(
        "- Memory ≤ {MEMORY_GOAL_MIB:.0} MiB, the listing peak included: {} (highest peak {peak:.1} MiB).\n\
         - First deletion ≤ {FIRST_DELETION_GOAL:.0} s after a cold start: {} ({} s).\n\
         - Catch-up at the budget's pace (within {slack:.0}%): {} (last deletion at {} s, {} of {} \
         deleted, against {pace:.1} s at the pace).",
        met(peak <= MEMORY_GOAL_MIB),
        met(first <= FIRST_DELETION_GOAL),
        seconds(ours.first_deletion),
        met(all_deleted && last <= pace * PACE_SLACK),
        seconds(ours.last_deletion),
        ours.deleted,
        figures.size.tenth(),
        slack = (PACE_SLACK - 1.0) * 100.0,
    )
}

#[cfg(test)]
mod tests {
    use super::met;

    #[test]
    fn a_goal_is_met_only_when_it_holds() {
        assert_eq!(met(true), "**met**");
        assert_eq!(met(false), "**not met**");
    }
}
