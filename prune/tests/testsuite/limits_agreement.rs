//! `Strategy::Limits` is the controller's count limits: for any set of runs and any limits, a
//! prune removes exactly what `kube_retention_common::limits::over_limit` says the controller
//! removes — the runs of a group given to it as the controller gives them
//! (`state/src/groups.rs`: creation time, outcome, `keep` or being deleted exempt).
//! If the prune crate's rule and the controller's drift apart, these tests fail.

use crate::support;

use std::collections::BTreeMap;

use kube_retention_common::limits::{LimitedRun, over_limit};
use kube_retention_common::progress::Outcome;
use kube_retention_prune::{Decision, Strategy};
use proptest::prelude::*;

use support::{Key, Run, State, at, groups, limit, plan_of, pruned, runs};

/// What the controller removes of `runs` under these limits, group by group, with why.
fn controller_removes(
    runs: &[Run],
    succeeded: Option<u32>,
    failed: Option<u32>,
) -> BTreeMap<Key, Decision> {
    let mut removed = BTreeMap::new();
    for members in groups(runs).values() {
        let candidates: Vec<LimitedRun<'_>> = members
            .iter()
            .map(|run| LimitedRun {
                name: &run.name,
                created: at(run.created),
                outcome: run.outcome(),
                exempt: run.keep || run.deleting,
            })
            .collect();
        for index in over_limit(&candidates, succeeded, failed) {
            let run = members[index];
            let (outcome, limit) = match run.outcome() {
                Some(Outcome::Succeeded) => (Outcome::Succeeded, succeeded),
                Some(Outcome::Failed) => (Outcome::Failed, failed),
                None => panic!("the controller's limits removed a running run: {run:?}"),
            };
            let limit = limit.unwrap_or_else(|| panic!("removed without a limit: {run:?}"));
            removed.insert(run.key(), Decision::Limits { outcome, limit });
        }
    }
    removed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_prune_by_limits_removes_what_the_controller_would(
        runs in runs(),
        succeeded in limit(),
        failed in limit(),
    ) {
        let plan = plan_of(&runs, Strategy::Limits { succeeded, failed });
        prop_assert_eq!(pruned(&plan), controller_removes(&runs, succeeded, failed));
    }
}

#[test]
fn the_newest_of_each_outcome_by_creation_stay_whenever_they_finished() {
    let finished = |outcome, at| State::Finished { outcome, at };
    let runs = [
        // Created first, finished last: the oldest by creation, so it goes.
        Run::new("ci", "slow", 1, finished(Outcome::Succeeded, 90)),
        Run::new("ci", "quick", 2, finished(Outcome::Succeeded, 3)),
        Run::new("ci", "newest", 3, finished(Outcome::Succeeded, 4)),
        Run::new("ci", "broke-early", 4, finished(Outcome::Failed, 5)),
        Run::new("ci", "broke-late", 5, finished(Outcome::Failed, 6)),
        Run::new("ci", "still-going", 0, State::Running),
        Run::new("other", "alone", 0, finished(Outcome::Succeeded, 1)),
    ];
    let plan = plan_of(
        &runs,
        Strategy::Limits {
            succeeded: Some(2),
            failed: Some(1),
        },
    );
    let gone: Vec<(&str, &Decision)> = plan
        .to_prune()
        .map(|planned| (planned.name.as_str(), &planned.decision))
        .collect();
    let limit = |outcome, limit| Decision::Limits { outcome, limit };
    assert_eq!(
        gone,
        [
            ("broke-early", &limit(Outcome::Failed, 1)),
            ("slow", &limit(Outcome::Succeeded, 2)),
        ]
    );
    assert_eq!(
        controller_removes(&runs, Some(2), Some(1)),
        support::pruned(&plan)
    );
}

#[test]
fn the_limits_decision_reads_like_a_policy() {
    let decision = Decision::Limits {
        outcome: Outcome::Failed,
        limit: 3,
    };
    assert_eq!(
        serde_json::to_value(&decision).ok(),
        Some(serde_json::json!({"decision": "limits", "outcome": "failed", "limit": 3}))
    );
}
