//! Never against the user's intent, without a cluster: stale stamps are removed and never acted
//! on, failing writes back off per object, objects the webhook never labelled are found, and a
//! finish time in the future is reported once.

use crate::support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube_retention_common::Registry;
use kube_retention_common::StampChange;
use kube_retention_state::{Action, Failure, Reason, State, Warning};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, leader, object, stamping_leader};

const STAMP: &str = "2026-01-01T00:00:12Z";

fn job(rv: &str, annotations: Value, finished: Option<&str>) -> DynamicObject {
    let mut value = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": rv,
        "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations}});
    if let Some(finished) = finished {
        value["status"] = json!({"completionTime": finished, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": finished}]});
    }
    object(value)
}

fn stamped(mut annotations: Value) -> Value {
    annotations["retention.dev/expires-at"] = json!(STAMP);
    annotations["retention.dev/stamped"] = json!(STAMP);
    annotations
}

fn warnings(actions: &[Action]) -> Vec<Warning> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Warn { warning, .. } => Some(*warning),
            _ => None,
        })
        .collect()
}

#[test]
fn a_removed_ttl_removes_the_stamp_and_cancels_the_deletion() {
    let mut state = stamping_leader();
    let ttl = json!({"retention.dev/ttl-after-succeeded": "12s"});
    let finished = Some("2026-01-01T00:00:00Z");
    state.applied(
        kind(JOB),
        &job("1", stamped(ttl), finished),
        at("2026-01-01T00:00:01Z"),
    );
    assert_eq!(state.next_deadline(), Some(at(STAMP)));
    let actions = state.applied(
        kind(JOB),
        &job("2", stamped(json!({})), finished),
        at("2026-01-01T00:00:02Z"),
    );
    assert!(
        matches!(&actions[..], [Action::Stamp { change: StampChange::Remove(_), resource_version, .. }] if resource_version == "2"),
        "{actions:?}"
    );
    assert_eq!(state.next_deadline(), None);
    assert_eq!(state.due(at("2026-01-02T00:00:00Z")), []);
}

#[test]
fn an_extended_ttl_restamps_and_deletes_only_at_the_new_deadline() {
    let mut state = stamping_leader();
    let finished = Some("2026-01-01T00:00:00Z");
    let short = stamped(json!({"retention.dev/ttl-after-succeeded": "12s"}));
    state.applied(
        kind(JOB),
        &job("1", short, finished),
        at("2026-01-01T00:00:01Z"),
    );
    let long = stamped(json!({"retention.dev/ttl-after-succeeded": "1m"}));
    let actions = state.applied(
        kind(JOB),
        &job("2", long, finished),
        at("2026-01-01T00:00:11.9Z"),
    );
    assert!(
        matches!(&actions[..], [Action::Stamp { change: StampChange::Set(new), .. }] if *new == at("2026-01-01T00:01:00Z")),
        "{actions:?}"
    );
    assert_eq!(deletes(&state.due(at("2026-01-01T00:00:59Z"))), []);
    assert_eq!(
        deletes(&state.due(at("2026-01-01T00:01:00Z"))),
        [("j".to_owned(), Reason::Ttl)]
    );
}

#[test]
fn a_deadline_the_user_wrote_still_deletes() {
    let mut state = leader();
    let mine = json!({"retention.dev/expires-at": "2026-01-01T00:00:30Z"});
    let actions = state.applied(
        kind(JOB),
        &job("1", mine, Some("2026-01-01T00:00:00Z")),
        at("2026-01-01T00:00:01Z"),
    );
    assert_eq!(actions, [], "the user's expires-at is never rewritten");
    assert_eq!(
        deletes(&state.due(at("2026-01-01T00:00:30Z"))),
        [("j".to_owned(), Reason::Ttl)]
    );
}

#[test]
fn failing_deletes_back_off_from_one_second_to_five_minutes_and_warn_once_per_step() {
    let mut state = leader();
    let ttl = json!({"retention.dev/ttl-after-succeeded": "1s"});
    state.applied(
        kind(JOB),
        &job("1", ttl.clone(), Some("2026-01-01T00:00:00Z")),
        at("2026-01-01T00:00:00Z"),
    );
    let mut now = at("2026-01-01T00:00:01Z");
    let mut attempts = Vec::new();
    let mut reported = 0;
    while now < at("2026-01-01T01:00:00Z") {
        let actions = state.due(now);
        if let [
            Action::Delete {
                key, eligible_at, ..
            },
        ] = &actions[..]
        {
            assert_eq!(
                *eligible_at,
                at("2026-01-01T00:00:01Z"),
                "delay counts from the deadline"
            );
            attempts.push(now.duration_since(at("2026-01-01T00:00:01Z")).as_secs());
            let failure = Failure::Error("denied by a ValidatingAdmissionPolicy".into());
            let warned = warnings(&state.delete_failed(&key.clone(), failure, now));
            reported += warned.len();
            assert!(
                warned
                    .iter()
                    .all(|warning| *warning == Warning::DeleteFailing)
            );
        } else {
            assert_eq!(actions, []);
        }
        assert_eq!(
            state.gauges(now).in_backoff,
            usize::from(!attempts.is_empty())
        );
        now = state.next_deadline().unwrap();
    }
    assert_eq!(
        attempts,
        [
            0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 811, 1111, 1411, 1711, 2011, 2311, 2611, 2911,
            3211, 3511
        ]
    );
    assert_eq!(
        reported, 10,
        "one Warning per backoff step, none once at the ceiling"
    );
    // A change to the object resets the backoff: the new version is tried at once.
    let actions = state.applied(kind(JOB), &job("2", ttl, Some("2026-01-01T00:00:00Z")), now);
    assert_eq!(actions, []);
    assert_eq!(state.gauges(now).in_backoff, 0);
    assert_eq!(deletes(&state.due(now)), [("j".to_owned(), Reason::Ttl)]);
}

#[test]
fn a_failing_stamp_backs_off_and_is_retried() {
    let mut state = stamping_leader();
    let ttl = json!({"retention.dev/ttl-after-succeeded": "1h"});
    let actions = state.applied(
        kind(JOB),
        &job("1", ttl, Some("2026-01-01T00:00:00Z")),
        at("2026-01-01T00:00:01Z"),
    );
    let [Action::Stamp { key, .. }] = &actions[..] else {
        panic!("{actions:?}")
    };
    let failure = Failure::Error("forbidden".into());
    let warned = state.stamp_failed(&key.clone(), failure, at("2026-01-01T00:00:01Z"));
    assert_eq!(warnings(&warned), [Warning::StampFailing]);
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T00:00:02Z")));
    assert_eq!(state.due(at("2026-01-01T00:00:01.5Z")), []);
    assert!(matches!(
        &state.due(at("2026-01-01T00:00:02Z"))[..],
        [Action::Stamp {
            change: StampChange::Set(_),
            ..
        }]
    ));
}

fn metadata(labels: Value, annotations: Value) -> ObjectMeta {
    serde_json::from_value(json!({"name": "j", "namespace": "kube-system", "uid": "u",
        "labels": labels, "annotations": annotations}))
    .unwrap()
}

#[test]
fn unlabelled_objects_with_settings_are_labelled_by_the_leader_alone() {
    let ttl = json!({"retention.dev/ttl-after-finished": "1h"});
    let now = at("2026-01-01T00:00:00Z");
    let mut follower = State::new(Registry::builtin().clone());
    assert_eq!(
        follower
            .labelling()
            .seen(kind(JOB), &metadata(json!({}), ttl.clone()), now),
        []
    );
    assert_eq!(follower.gauges(now).stragglers, 1);
    let actions = follower.set_leader(true, now);
    assert!(matches!(&actions[..], [Action::Label { key }] if &*key.namespace == "kube-system"));

    let mut state = leader();
    let plain = metadata(json!({}), json!({"example.com/note": "x"}));
    assert_eq!(state.labelling().seen(kind(JOB), &plain, now), []);
    let actions = state
        .labelling()
        .seen(kind(JOB), &metadata(json!({}), ttl.clone()), now);
    let [Action::Label { key }] = &actions[..] else {
        panic!("{actions:?}")
    };
    assert_eq!(
        state
            .labelling()
            .seen(kind(JOB), &metadata(json!({}), ttl.clone()), now),
        [],
        "asked once"
    );
    let failure = Failure::Error("forbidden".into());
    let warned = state.labelling().failed(&key.clone(), failure, now);
    assert_eq!(warnings(&warned), [Warning::LabelFailing]);
    assert_eq!(state.labelling().retry(at("2026-01-01T00:00:00.5Z")), []);
    assert_eq!(state.labelling().retry(at("2026-01-01T00:00:01Z")).len(), 1);
    let labelled = metadata(json!({"retention.dev/managed": "true"}), ttl);
    assert_eq!(state.labelling().seen(kind(JOB), &labelled, now), []);
    assert_eq!(state.gauges(now).stragglers, 0);
}

#[test]
fn a_finish_time_in_the_future_is_reported_once_and_counts_from_then() {
    let mut state = leader();
    let ttl = json!({"retention.dev/ttl-after-succeeded": "2s"});
    let future = Some("2026-01-01T00:01:00Z");
    let first = state.applied(
        kind(JOB),
        &job("1", ttl.clone(), future),
        at("2026-01-01T00:00:00Z"),
    );
    assert_eq!(warnings(&first), [Warning::FinishInFuture]);
    let again = state.applied(
        kind(JOB),
        &job("2", ttl, future),
        at("2026-01-01T00:00:10Z"),
    );
    assert_eq!(warnings(&again), []);
    assert_eq!(deletes(&state.due(at("2026-01-01T00:01:01Z"))), []);
    assert_eq!(
        deletes(&state.due(at("2026-01-01T00:01:02Z"))),
        [("j".to_owned(), Reason::Ttl)]
    );
}

#[test]
fn a_follower_has_no_deadline_to_wake_for() {
    let mut state = State::new(Registry::builtin().clone());
    let ttl = json!({"retention.dev/ttl-after-succeeded": "1s"});
    state.applied(
        kind(JOB),
        &job("1", ttl, Some("2026-01-01T00:00:00Z")),
        at("2026-01-01T00:00:05Z"),
    );
    assert_eq!(
        state.next_deadline(),
        None,
        "a follower would spin on an overdue deadline"
    );
    state.set_leader(true, at("2026-01-01T00:00:05Z"));
    assert_eq!(state.next_deadline(), None, "taken at once when it led");
}
