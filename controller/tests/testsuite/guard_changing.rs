//! A policy whose next generation is being compiled (on the evaluator, off the loop) deletes
//! nothing under the generation it replaces — its writer may have taken a TTL away, or added a
//! `holdWhile` — and once the next generation is loaded, what it governs is judged afresh
//! under that one.

use crate::support;

use kube_retention_state::{Approval, LoadedPolicy, PolicyKey, State};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, loaded_policy, succeeded_job};

const NOW: &str = "2026-01-02T00:00:00Z";

fn key() -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: "jobs".into(),
    }
}

fn generation(ttl: &str, generation: i64) -> LoadedPolicy {
    let spec: Value =
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": ttl});
    LoadedPolicy {
        generation: Some(generation),
        approval: Approval::default(),
        ..loaded_policy(spec)
    }
}

/// A leader without a blast-radius threshold, under generation 1 of a one-second TTL.
fn leading_under_a_second() -> State {
    let mut state = State::new(kube_retention_common::Registry::builtin().clone())
        .with_max_immediate_deletions(0);
    assert_eq!(state.set_leader(true, at(NOW)), []);
    state.policy_applied(key(), generation("1s", 1));
    state
}

/// The Jobs `names` listed afresh and judged at `now`; answers the names deleted.
fn list(state: &mut State, names: &[&str], now: &str) -> Vec<String> {
    let now = at(now);
    state.relist_started(kind(JOB));
    let mut actions = Vec::new();
    for name in names {
        actions.extend(state.applied(kind(JOB), &succeeded_job("ns", name), now));
    }
    actions.extend(state.relist_done(kind(JOB), now));
    actions.extend(state.due(now));
    deletes(&actions)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn while_a_generation_compiles_the_one_it_replaces_deletes_nothing() {
    let mut state = leading_under_a_second();
    state.policy_changing(&key());
    assert_eq!(
        list(&mut state, &["job-a", "job-b"], NOW),
        Vec::<String>::new(),
        "due a day ago under generation 1, which is being replaced"
    );
    assert_eq!(state.due(at("2026-01-03T00:00:00Z")), [], "nor later");
    // Generation 2 took the TTL up to a month: judged afresh under it, nothing is due.
    state.policy_applied(key(), generation("720h", 2));
    assert_eq!(
        list(&mut state, &["job-a", "job-b"], NOW),
        Vec::<String>::new()
    );
}

#[test]
fn once_the_next_generation_is_loaded_what_it_makes_due_goes() {
    let mut state = leading_under_a_second();
    state.policy_changing(&key());
    assert_eq!(list(&mut state, &["job-a"], NOW), Vec::<String>::new());
    state.policy_applied(key(), generation("2s", 2));
    assert_eq!(list(&mut state, &["job-a"], NOW), ["job-a"]);
}

#[test]
fn without_a_change_under_way_the_generation_in_force_deletes() {
    let mut state = leading_under_a_second();
    assert_eq!(list(&mut state, &["job-a"], NOW), ["job-a"]);
}

#[test]
fn a_change_of_a_policy_not_loaded_holds_nothing_else() {
    let mut state = leading_under_a_second();
    let other = PolicyKey {
        namespace: Some("ns".into()),
        name: "new".into(),
    };
    state.policy_changing(&other);
    assert_eq!(list(&mut state, &["job-a"], NOW), ["job-a"]);
}
