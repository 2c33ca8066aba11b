//! Objects already being deleted (`deletionTimestamp` set, held by a finalizer) are going
//! anyway: neither strategy that keeps "the newest N" counts them, so they never take the place
//! of an object that should stay, and no plan prunes them again.

use crate::support;

use kube_retention_common::progress::Outcome;
use kube_retention_prune::{Decision, Strategy};
use proptest::prelude::*;

use support::{Run, State, count, decisions, limit, plan_of, runs};

/// `runs` as they are, and with every one being deleted under another name.
fn with_deleting_copies(runs: &[Run], going: &[Run]) -> Vec<Run> {
    let copies = going.iter().map(|run| Run {
        name: format!("going-{}", run.name),
        deleting: true,
        ..run.clone()
    });
    runs.iter().cloned().chain(copies).collect()
}

/// Every object of `runs` is decided alike with and without the objects being deleted beside
/// it, and those are all `Deleting`.
fn deleting_changes_nothing(runs: &[Run], going: &[Run], strategy: Strategy) {
    let alone = decisions(&plan_of(runs, strategy.clone()));
    let mut beside = decisions(&plan_of(&with_deleting_copies(runs, going), strategy));
    let copy = |(_, _, name): &support::Key| name.starts_with("going-");
    let copies: Vec<Decision> = beside
        .iter()
        .filter(|(key, _)| copy(key))
        .map(|(_, decision)| decision.clone())
        .collect();
    beside.retain(|key, _| !copy(key));
    assert_eq!(beside, alone);
    assert!(
        copies
            .iter()
            .all(|decision| *decision == Decision::Deleting),
        "{copies:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn objects_being_deleted_do_not_count_for_the_limits(
        runs in runs(),
        going in runs(),
        succeeded in limit(),
        failed in limit(),
    ) {
        deleting_changes_nothing(&runs, &going, Strategy::Limits { succeeded, failed });
    }

    #[test]
    fn objects_being_deleted_do_not_count_for_newest_finished(
        runs in runs(),
        going in runs(),
        count in count(),
    ) {
        deleting_changes_nothing(&runs, &going, Strategy::NewestFinished(count));
    }
}

#[test]
fn the_newest_object_being_deleted_takes_no_place_among_the_kept() {
    let succeeded = |at| State::Finished {
        outcome: Outcome::Succeeded,
        at,
    };
    let mut going = Run::new("ci", "d", 4, succeeded(4));
    going.deleting = true;
    let runs = [
        Run::new("ci", "a", 1, succeeded(1)),
        Run::new("ci", "b", 2, succeeded(2)),
        Run::new("ci", "c", 3, succeeded(3)),
        going,
    ];
    for strategy in [
        Strategy::NewestFinished(2),
        Strategy::Limits {
            succeeded: Some(2),
            failed: None,
        },
    ] {
        let decided: Vec<(String, bool)> = plan_of(&runs, strategy.clone())
            .objects
            .into_iter()
            .map(|planned| (planned.name, planned.decision.prunes()))
            .collect();
        let kept_or_not = |name: &str, prunes| (name.to_owned(), prunes);
        assert_eq!(
            decided,
            [
                kept_or_not("a", true),
                kept_or_not("d", false),
                kept_or_not("b", false),
                kept_or_not("c", false),
            ],
            "{strategy:?}"
        );
    }
}
