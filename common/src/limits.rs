//! Which runs a count limit removes: per parent, keep the newest N succeeded and the newest N
//! failed runs by creation time; running runs never count and never go, and runs marked
//! `retention.dev/keep` or already being deleted are left out of the count.

use jiff::Timestamp;

use crate::progress::Outcome;

/// Count limits as kube-retention accepts them (Shipwright's CRD allows up to 10000).
pub const LIMIT_RANGE: (u32, u32) = (1, 100);
/// OpenShift's history limits: zero keeps none.
pub const HISTORY_LIMIT_RANGE: (u32, u32) = (0, 100);

/// A run as far as limits care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitedRun<'a> {
    pub name: &'a str,
    pub created: Timestamp,
    /// `None` while running.
    pub outcome: Option<Outcome>,
    /// Kept (`retention.dev/keep`) or already being deleted: neither counted nor removed.
    pub exempt: bool,
}

/// The indexes into `runs` of the runs beyond the limits, oldest last within each outcome.
pub fn over_limit(
    runs: &[LimitedRun<'_>],
    succeeded_limit: Option<u32>,
    failed_limit: Option<u32>,
) -> Vec<usize> {
    let mut removed = Vec::new();
    for (outcome, limit) in [
        (Outcome::Succeeded, succeeded_limit),
        (Outcome::Failed, failed_limit),
    ] {
        let Some(limit) = limit else { continue };
        let mut finished: Vec<usize> = (0..runs.len())
            .filter(|&index| runs[index].outcome == Some(outcome) && !runs[index].exempt)
            .collect();
        // Newest first; the name breaks ties so the choice is stable.
        finished.sort_by(|&a, &b| {
            (runs[b].created, runs[b].name).cmp(&(runs[a].created, runs[a].name))
        });
        removed.extend(finished.into_iter().skip(limit as usize));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn run(name: &str, second: i64, outcome: Option<Outcome>) -> LimitedRun<'_> {
        LimitedRun {
            name,
            created: at(second),
            outcome,
            exempt: false,
        }
    }

    fn names<'a>(runs: &[LimitedRun<'a>], indexes: Vec<usize>) -> Vec<&'a str> {
        indexes.into_iter().map(|index| runs[index].name).collect()
    }

    #[test]
    fn keeps_the_newest_succeeded_and_never_touches_running_runs() {
        let runs = [
            run("r1", 1, Some(Outcome::Succeeded)),
            run("r2", 2, Some(Outcome::Succeeded)),
            run("r3", 3, Some(Outcome::Succeeded)),
            run("r4", 4, Some(Outcome::Succeeded)),
            run("running", 0, None),
        ];
        assert_eq!(names(&runs, over_limit(&runs, Some(2), None)), ["r2", "r1"]);
        assert_eq!(
            names(&runs, over_limit(&runs, Some(1), None)),
            ["r3", "r2", "r1"]
        );
        assert_eq!(over_limit(&runs, None, Some(1)), Vec::<usize>::new());
    }

    #[test]
    fn counts_outcomes_separately() {
        let runs = [
            run("ok-old", 1, Some(Outcome::Succeeded)),
            run("bad-old", 2, Some(Outcome::Failed)),
            run("ok-new", 3, Some(Outcome::Succeeded)),
            run("bad-new", 4, Some(Outcome::Failed)),
        ];
        assert_eq!(
            names(&runs, over_limit(&runs, Some(1), Some(1))),
            ["ok-old", "bad-old"]
        );
        assert_eq!(
            names(&runs, over_limit(&runs, Some(2), Some(2))),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn exempt_runs_neither_count_nor_go() {
        let mut runs = vec![
            run("kept", 9, Some(Outcome::Succeeded)),
            run("a", 1, Some(Outcome::Succeeded)),
            run("b", 2, Some(Outcome::Succeeded)),
        ];
        runs[0].exempt = true;
        assert_eq!(names(&runs, over_limit(&runs, Some(1), None)), ["a"]);
    }

    #[test]
    fn ties_break_by_name_so_the_choice_is_stable() {
        let runs = [
            run("b", 1, Some(Outcome::Failed)),
            run("a", 1, Some(Outcome::Failed)),
        ];
        assert_eq!(names(&runs, over_limit(&runs, None, Some(1))), ["a"]);
    }
}
