//! The blast-radius guard in the controller's state: a new or changed policy's deletions wait
//! until the kinds it names are listed afresh under it; within its threshold they then go at
//! once, beyond it the policy awaits approval of that generation and deletes nothing.

use crate::support;

use kube_retention_state::{Approval, LoadedPolicy, PolicyKey, Standing, State};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, loaded_policy, object};

const NOW: &str = "2026-01-02T00:00:00Z";

fn key() -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: "jobs".into(),
    }
}

fn policy(spec: Value, generation: i64, approval: Approval) -> LoadedPolicy {
    LoadedPolicy {
        generation: Some(generation),
        approval,
        ..loaded_policy(spec)
    }
}

fn jobs_ttl(ttl: &str) -> Value {
    json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": ttl})
}

/// A Job that succeeded on New Year's Day.
fn job(name: &str) -> kube::api::DynamicObject {
    object(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    }))
}

/// A leader whose guard holds back more than `threshold` deletions.
fn guarded(threshold: u32) -> State {
    let mut state = State::new(kube_retention_common::Registry::builtin().clone())
        .with_max_immediate_deletions(threshold);
    assert_eq!(state.set_leader(true, at(NOW)), []);
    state
}

/// `count` Jobs listed afresh (as after a policy change), all judged at once (no expressions);
/// answers the names deleted.
fn list_jobs(state: &mut State, count: usize) -> Vec<String> {
    let now = at(NOW);
    state.relist_started(kind(JOB));
    let mut actions = Vec::new();
    for index in 0..count {
        actions.extend(state.applied(kind(JOB), &job(&format!("job-{index}")), now));
    }
    actions.extend(state.relist_done(kind(JOB), now));
    actions.extend(state.settled(kind(JOB), now, &everything_judged()));
    actions.extend(state.due(now));
    deletes(&actions)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

fn standing(state: &State) -> (Standing, usize) {
    let guard = state.summaries()[&key()].guard.clone().unwrap();
    (guard.standing, guard.held.values().sum())
}

#[test]
fn a_change_that_would_delete_more_than_the_threshold_waits_for_approval() {
    let mut state = guarded(100);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 2, Approval::default()));
    assert_eq!(standing(&state), (Standing::Counting, 0));
    assert_eq!(list_jobs(&mut state, 150), Vec::<String>::new());
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 150));
    let guard = state.summaries()[&key()].guard.clone().unwrap();
    assert_eq!(guard.held.get(&kind(JOB)), Some(&150));
    assert_eq!(guard.sample.len(), 20, "a sample, not all 150");
    assert_eq!(
        state.due(at("2026-01-03T00:00:00Z")),
        [],
        "nothing, later either"
    );

    // Approved: that generation's objects are judged afresh and all go.
    let approved = Approval {
        approved: Some(2),
        accepted: Some(1),
    };
    state.policy_applied(key(), policy(jobs_ttl("1s"), 2, approved));
    assert_eq!(standing(&state), (Standing::Accepted, 0));
    assert_eq!(list_jobs(&mut state, 150).len(), 150);
}

#[test]
fn within_the_threshold_the_held_deletions_go_when_the_list_ends() {
    let mut state = guarded(100);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 1, Approval::default()));
    let now = at(NOW);
    state.relist_started(kind(JOB));
    let mut actions = Vec::new();
    for index in 0..100 {
        actions.extend(state.applied(kind(JOB), &job(&format!("job-{index}")), now));
    }
    actions.extend(state.due(now));
    assert_eq!(deletes(&actions), [], "held while counting");
    assert_eq!(deletes(&state.relist_done(kind(JOB), now)), []);
    assert_eq!(
        standing(&state).0,
        Standing::Counting,
        "objects whose expressions are under way may still count"
    );
    let released = deletes(&state.settled(kind(JOB), now, &everything_judged()));
    assert_eq!(released.len(), 100, "exactly the threshold is allowed");
    assert_eq!(standing(&state), (Standing::Accepted, 0));
}

#[test]
fn a_count_waits_for_its_own_namespace_only_and_a_cluster_policy_for_all() {
    let now = at(NOW);
    let busy: std::collections::HashSet<std::sync::Arc<str>> = ["other".into()].into();
    let everywhere = PolicyKey {
        namespace: None,
        name: "everywhere".into(),
    };
    for (policy_key, waits) in [(key(), false), (everywhere, true)] {
        let mut state = guarded(100);
        state.policy_applied(
            policy_key.clone(),
            policy(jobs_ttl("1s"), 1, Approval::default()),
        );
        state.relist_started(kind(JOB));
        for index in 0..3 {
            state.applied(kind(JOB), &job(&format!("job-{index}")), now);
        }
        assert_eq!(deletes(&state.relist_done(kind(JOB), now)), []);
        let standing = |state: &State| {
            let guard = state.summaries()[&policy_key].guard.clone().unwrap();
            guard.standing
        };
        let released = deletes(&state.settled(kind(JOB), now, &busy));
        if waits {
            assert_eq!(released, [], "{policy_key}: governs the busy namespace too");
            assert_eq!(standing(&state), Standing::Counting);
            let released = deletes(&state.settled(kind(JOB), now, &everything_judged()));
            assert_eq!(
                released.len(),
                3,
                "{policy_key}: once every namespace is judged"
            );
        } else {
            assert_eq!(
                released.len(),
                3,
                "{policy_key}: another namespace's evaluations under way do not hold it up"
            );
        }
        assert_eq!(standing(&state), Standing::Accepted, "{policy_key}");
    }
}

#[test]
fn only_a_list_begun_after_the_change_completes_the_count() {
    let mut state = guarded(100);
    let now = at(NOW);
    state.relist_started(kind(JOB));
    state.policy_applied(key(), policy(jobs_ttl("1s"), 1, Approval::default()));
    state.applied(kind(JOB), &job("early"), now);
    assert_eq!(deletes(&state.relist_done(kind(JOB), now)), []);
    assert_eq!(
        deletes(&state.settled(kind(JOB), now, &everything_judged())),
        []
    );
    assert_eq!(
        standing(&state).0,
        Standing::Counting,
        "a list under way at the change saw objects judged before it"
    );
    assert_eq!(deletes(&state.due(now)), [], "held while counting");
    assert_eq!(
        list_jobs(&mut state, 3).len(),
        3,
        "the new list ends the count"
    );
    assert_eq!(standing(&state), (Standing::Accepted, 0));
}

#[test]
fn a_generation_accepted_or_approved_before_or_unguarded_is_not_counted_again() {
    let accepted = Approval {
        approved: None,
        accepted: Some(3),
    };
    let mut state = guarded(100);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 3, accepted));
    assert_eq!(
        list_jobs(&mut state, 150).len(),
        150,
        "accepted before a restart"
    );

    let mut state = guarded(0);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 1, Approval::default()));
    assert_eq!(
        list_jobs(&mut state, 150).len(),
        150,
        "--max-immediate-deletions=0"
    );

    let mut state = guarded(100);
    let mut spec = jobs_ttl("1s");
    spec["safety"] = json!({"maxImmediateDeletions": 0});
    state.policy_applied(key(), policy(spec, 1, Approval::default()));
    assert_eq!(list_jobs(&mut state, 150).len(), 150, "the policy's own 0");

    let mut state = guarded(100);
    let mut spec = jobs_ttl("1s");
    spec["safety"] = json!({"maxImmediateDeletions": 10});
    state.policy_applied(key(), policy(spec, 1, Approval::default()));
    assert_eq!(
        list_jobs(&mut state, 11),
        Vec::<String>::new(),
        "the policy's own 10"
    );
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 11));
}

#[test]
fn held_objects_that_go_are_no_longer_counted() {
    let mut state = guarded(1);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 1, Approval::default()));
    assert_eq!(list_jobs(&mut state, 3), Vec::<String>::new());
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 3));
    state.removed(kind(JOB), "ns", "job-0");
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 2));
}

#[test]
fn a_new_generation_is_counted_afresh() {
    let mut state = guarded(100);
    state.policy_applied(key(), policy(jobs_ttl("720h"), 1, Approval::default()));
    assert_eq!(list_jobs(&mut state, 150), Vec::<String>::new());
    assert_eq!(
        standing(&state),
        (Standing::Accepted, 0),
        "nothing due at once"
    );
    // The TTL cut from a month to a second: all 150 at once.
    state.policy_applied(key(), policy(jobs_ttl("1s"), 2, Approval::default()));
    assert_eq!(list_jobs(&mut state, 150), Vec::<String>::new());
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 150));
}

#[test]
fn a_limit_cut_counts_the_runs_over_it() {
    let mut state = guarded(100);
    let spec =
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "succeededLimit": 1});
    state.policy_applied(key(), policy(spec, 1, Approval::default()));
    assert_eq!(list_jobs(&mut state, 150), Vec::<String>::new());
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 149));
}

#[test]
fn a_follower_counts_too_and_deletes_nothing_once_it_leads() {
    let mut state = State::new(kube_retention_common::Registry::builtin().clone())
        .with_max_immediate_deletions(100);
    state.policy_applied(key(), policy(jobs_ttl("1s"), 1, Approval::default()));
    assert_eq!(list_jobs(&mut state, 150), Vec::<String>::new());
    assert_eq!(standing(&state), (Standing::AwaitingApproval, 150));
    assert_eq!(deletes(&state.set_leader(true, at(NOW))), []);
}

/// No namespace's objects wait for their expressions.
fn everything_judged() -> std::collections::HashSet<std::sync::Arc<str>> {
    std::collections::HashSet::new()
}
