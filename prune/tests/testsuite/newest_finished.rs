//! `Strategy::NewestFinished` (formerly `MaxCount`) keeps what it always kept: per kind and
//! namespace, the newest N finished objects by finish time, succeeded and failed together, the
//! name breaking ties — except that objects being deleted no longer take a place. On the same
//! objects it and the controller's limits may disagree; that is why they are two strategies.

use crate::support;

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use kube_retention_common::progress::Outcome;
use kube_retention_prune::{Decision, Settings, Strategy, plan};
use proptest::prelude::*;
use serde_json::json;

use support::{Key, Run, State, count, groups, now, plan_of, pruned, runs};

/// The rule, written out: of each group's finished objects neither kept nor being deleted,
/// newest finished first (ties by name), all beyond the first `count`.
fn beyond_the_newest(runs: &[Run], count: usize) -> BTreeMap<Key, Decision> {
    let mut chosen = BTreeMap::new();
    for members in groups(runs).values() {
        let mut finished: Vec<(i64, &Run)> = members
            .iter()
            .filter(|run| !run.keep && !run.deleting)
            .filter_map(|run| match run.state {
                State::Finished { at, .. } => Some((at, *run)),
                State::Running => None,
            })
            .collect();
        finished.sort_by(|(a, run_a), (b, run_b)| (b, &run_a.name).cmp(&(a, &run_b.name)));
        for (_, run) in finished.into_iter().skip(count) {
            chosen.insert(run.key(), Decision::NewestFinished { limit: count });
        }
    }
    chosen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn it_prunes_beyond_the_newest_finished_across_outcomes(runs in runs(), count in count()) {
        let plan = plan_of(&runs, Strategy::NewestFinished(count));
        prop_assert_eq!(pruned(&plan), beyond_the_newest(&runs, count));
    }
}

fn finished(outcome: Outcome, at: i64) -> State {
    State::Finished { outcome, at }
}

fn names(runs: &[Run], strategy: Strategy) -> Vec<String> {
    plan_of(runs, strategy)
        .to_prune()
        .map(|planned| planned.name.clone())
        .collect()
}

#[test]
fn finish_time_decides_not_creation_and_not_the_outcome() {
    let runs = [
        Run::new("ci", "slow", 1, finished(Outcome::Succeeded, 90)),
        Run::new("ci", "quick", 2, finished(Outcome::Succeeded, 3)),
        Run::new("ci", "broke", 3, finished(Outcome::Failed, 80)),
        Run::new("ci", "tie-b", 4, finished(Outcome::Failed, 50)),
        Run::new("ci", "tie-a", 5, finished(Outcome::Succeeded, 50)),
    ];
    assert_eq!(
        names(&runs, Strategy::NewestFinished(3)),
        ["quick", "tie-b"]
    );
    // The controller's limits, on the same objects: by creation, per outcome.
    let limits = Strategy::Limits {
        succeeded: Some(1),
        failed: Some(1),
    };
    assert_eq!(names(&runs, limits), ["quick", "broke", "slow"]);
}

#[test]
fn without_a_finish_time_the_creation_time_stands_in() {
    let job = |name: &str, created: &str, completed: Option<&str>| -> DynamicObject {
        let mut status = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        if let Some(completed) = completed {
            status["completionTime"] = json!(completed);
        }
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ci", "uid": name,
                         "creationTimestamp": created},
            "status": status,
        }))
        .unwrap_or_else(|error| panic!("{name}: {error}"))
    };
    let jobs = [
        job("undated", "2026-11-21T00:00:00Z", None),
        job(
            "older",
            "2026-11-01T00:00:00Z",
            Some("2026-11-20T00:00:00Z"),
        ),
    ];
    let settings = Settings {
        strategies: vec![Strategy::NewestFinished(1)],
        ..Settings::default()
    };
    let plan = plan(&jobs, &settings, now());
    let decided: Vec<(&str, Option<String>, &Decision)> = plan
        .objects
        .iter()
        .map(|planned| {
            let finished = planned.finished.map(|at| at.to_string());
            (planned.name.as_str(), finished, &planned.decision)
        })
        .collect();
    assert_eq!(
        decided,
        [
            (
                "older",
                Some("2026-11-20T00:00:00Z".to_owned()),
                &Decision::NewestFinished { limit: 1 }
            ),
            (
                "undated",
                Some("2026-11-21T00:00:00Z".to_owned()),
                &Decision::Kept
            ),
        ]
    );
    assert_eq!(
        serde_json::to_value(&plan.objects[0].decision).ok(),
        Some(json!({"decision": "newestFinished", "limit": 1}))
    );
}
