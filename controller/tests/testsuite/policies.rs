//! Retention policies in the controller's state: a policy's deletions name it, a dry run only
//! reports, limits count per `groupBy` value, and a changed policy takes its deadlines away
//! until its objects are judged again.

use crate::support;

use kube_retention_state::{Action, LoadedPolicy, PolicyKey, Reason};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, leader, loaded_policy, object};

fn policy(spec: Value) -> LoadedPolicy {
    loaded_policy(spec)
}

fn key(name: &str) -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: name.into(),
    }
}

/// A Job succeeded at 00:00:01, created at `created`, labelled `app`.
fn job(name: &str, created: &str, app: &str) -> kube::api::DynamicObject {
    object(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": created,
                     "labels": {"app": app}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    }))
}

#[test]
fn a_policy_deletes_unannotated_objects_and_its_deletions_name_it() {
    let mut state = leader();
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": "2s"});
    state.policy_applied(key("jobs"), policy(spec));
    state.applied(
        kind(JOB),
        &job("j", "2026-01-01T00:00:00Z", "a"),
        at("2026-01-01T00:00:01Z"),
    );
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T00:00:03Z")));
    let actions = state.due(at("2026-01-01T00:00:03Z"));
    match &actions[..] {
        [
            Action::Delete {
                policy: Some(governance),
                reason: Reason::Ttl,
                ..
            },
        ] => {
            assert_eq!(*governance.policy, key("jobs"));
            assert_eq!(governance.overruled, []);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(state.summaries()[&key("jobs")].matched, 1);
}

#[test]
fn only_the_cluster_policies_and_the_objects_own_namespace_policies_govern_it() {
    let mut state = leader();
    let spec = |ttl: &str| json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": ttl});
    // Namespaces that sort right beside "ns", and many policies elsewhere.
    for (namespace, name) in [("n", "a"), ("ns-a", "a"), ("ns\u{0}", "a"), ("nt", "a")] {
        let key = PolicyKey {
            namespace: Some(namespace.into()),
            name: name.into(),
        };
        state.policy_applied(key, policy(spec("1s")));
    }
    for index in 0..1_000 {
        let key = PolicyKey {
            namespace: Some(format!("tenant-{index}")),
            name: "jobs".into(),
        };
        state.policy_applied(key, policy(spec("1s")));
    }
    let cluster = PolicyKey {
        namespace: None,
        name: "everywhere".into(),
    };
    state.policy_applied(cluster.clone(), policy(spec("1h")));
    let now = at("2026-01-01T00:00:01Z");
    state.applied(kind(JOB), &job("j", "2026-01-01T00:00:00Z", "a"), now);
    assert_eq!(
        state.next_deadline(),
        Some(at("2026-01-01T01:00:01Z")),
        "the cluster policy's hour, none of the other namespaces' second"
    );
    state.policy_applied(key("own"), policy(spec("2s")));
    state.applied(kind(JOB), &job("j", "2026-01-01T00:00:00Z", "a"), now);
    assert_eq!(
        state.next_deadline(),
        Some(at("2026-01-01T00:00:03Z")),
        "its own namespace's policy comes before the cluster's"
    );
    assert_eq!(state.summaries()[&key("own")].matched, 1);
    assert_eq!(state.summaries()[&cluster].matched, 0);
}

#[test]
fn a_dry_run_reports_what_it_would_delete_and_deletes_nothing() {
    let mut state = leader();
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttlAfterSucceeded": "2s", "succeededLimit": 1, "dryRun": true});
    state.policy_applied(key("rehearsal"), policy(spec));
    let mut actions = state.applied(
        kind(JOB),
        &job("old", "2026-01-01T00:00:00Z", "a"),
        at("2026-01-01T00:00:01Z"),
    );
    actions.extend(state.applied(
        kind(JOB),
        &job("new", "2026-01-01T00:00:01Z", "a"),
        at("2026-01-01T00:00:01Z"),
    ));
    actions.extend(state.due(at("2026-01-01T00:00:10Z")));
    assert_eq!(deletes(&actions), []);
    let summary = &state.summaries()[&key("rehearsal")];
    let reported: Vec<(&str, Reason)> = summary
        .would_delete
        .iter()
        .map(|(key, _, reason)| (&*key.name, *reason))
        .collect();
    assert_eq!(reported, [("old", Reason::Limit), ("new", Reason::Ttl)]);
    assert_eq!(
        state.due(at("2026-01-01T00:01:00Z")),
        [],
        "reported once, not again"
    );
}

#[test]
fn limits_count_per_group_by_value() {
    let mut state = leader();
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "succeededLimit": 1, "groupBy": "app"});
    state.policy_applied(key("limits"), policy(spec));
    let now = at("2026-01-01T00:00:05Z");
    let mut actions = Vec::new();
    for (name, created, app) in [
        ("a1", "2026-01-01T00:00:00Z", "a"),
        ("b1", "2026-01-01T00:00:01Z", "b"),
        ("a2", "2026-01-01T00:00:02Z", "a"),
    ] {
        actions.extend(state.applied(kind(JOB), &job(name, created, app), now));
    }
    assert_eq!(deletes(&actions), [("a1".to_owned(), Reason::Limit)]);
}

#[test]
fn a_changed_policy_takes_its_deadlines_away_until_judged_again() {
    let mut state = leader();
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": "2s"});
    state.policy_applied(key("jobs"), policy(spec.clone()));
    state.applied(
        kind(JOB),
        &job("j", "2026-01-01T00:00:00Z", "a"),
        at("2026-01-01T00:00:01Z"),
    );
    let mut dry = spec;
    dry["dryRun"] = json!(true);
    let kinds = state.policy_applied(key("jobs"), policy(dry));
    assert_eq!(kinds.len(), 2, "its kinds before and after, to list afresh");
    assert_eq!(state.next_deadline(), None);
    assert_eq!(deletes(&state.due(at("2026-01-01T00:00:10Z"))), []);
}

#[test]
fn limits_wait_for_the_end_of_a_list_and_are_enforced_once() {
    let mut state = leader();
    let spec =
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "succeededLimit": 1});
    state.policy_applied(key("limits"), policy(spec));
    let now = at("2026-01-01T00:00:05Z");
    state.relist_started(kind(JOB));
    let mut during = Vec::new();
    for (name, created) in [
        ("j1", "2026-01-01T00:00:00Z"),
        ("j2", "2026-01-01T00:00:01Z"),
        ("j3", "2026-01-01T00:00:02Z"),
    ] {
        during.extend(state.applied(kind(JOB), &job(name, created, "a"), now));
    }
    assert_eq!(deletes(&during), [], "nothing while the list is under way");
    let mut after = deletes(&state.relist_done(kind(JOB), now));
    after.sort();
    assert_eq!(
        after,
        [
            ("j1".to_owned(), Reason::Limit),
            ("j2".to_owned(), Reason::Limit)
        ]
    );
}

#[test]
fn of_two_policies_the_earlier_deadline_wins_and_the_deletion_says_over_which() {
    let mut state = leader();
    let ttl = |ttl: &str| json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttlAfterSucceeded": ttl});
    state.policy_applied(key("slow"), policy(ttl("1h")));
    state.policy_applied(key("fast"), policy(ttl("2s")));
    state.applied(
        kind(JOB),
        &job("j", "2026-01-01T00:00:00Z", "a"),
        at("2026-01-01T00:00:01Z"),
    );
    let actions = state.due(at("2026-01-01T00:00:03Z"));
    let [
        Action::Delete {
            policy: Some(governance),
            ..
        },
    ] = &actions[..]
    else {
        panic!("{actions:?}");
    };
    assert_eq!(
        governance.to_string(),
        "by RetentionPolicy ns/fast, whose deadline is earlier than RetentionPolicy ns/slow's"
    );
}

/// A dry run that reported an object, then turned off: the object goes. It was held as pending
/// (its deletion reported, not sent), and stayed so through the relist, so it was never deleted
/// until it changed.
#[test]
fn a_dry_run_turned_off_deletes_what_it_reported() {
    let mut state = leader();
    let spec = |dry_run: bool| {
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
               "ttlAfterSucceeded": "1s", "dryRun": dry_run})
    };
    state.policy_applied(key("rehearsal"), policy(spec(true)));
    let job = job("j", "2026-01-01T00:00:00Z", "a");
    let now = at("2026-01-01T01:00:00Z");
    state.applied(kind(JOB), &job, now);
    assert_eq!(deletes(&state.due(now)), []);
    assert_eq!(state.summaries()[&key("rehearsal")].would_delete.len(), 1);

    let real = LoadedPolicy {
        generation: Some(2),
        ..policy(spec(false))
    };
    state.policy_applied(key("rehearsal"), real);
    state.relist_started(kind(JOB));
    let mut actions = state.applied(kind(JOB), &job, now);
    actions.extend(state.relist_done(kind(JOB), now));
    actions.extend(state.settled(kind(JOB), now, &everything_judged()));
    actions.extend(state.due(now));
    assert_eq!(deletes(&actions), [("j".to_owned(), Reason::Ttl)]);
}

/// No namespace's objects wait for their expressions.
fn everything_judged() -> std::collections::HashSet<std::sync::Arc<str>> {
    std::collections::HashSet::new()
}
