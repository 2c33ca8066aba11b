//! The controller's decisions, without a cluster: watch events and the clock in, actions out.

use kube_retention_common::StampChange;
use kube_retention_state::{Action, Failure, Reason};
use serde_json::json;

use crate::support;

use support::*;

#[test]
fn stamps_on_finish_and_deletes_at_expiry_with_preconditions() {
    let mut state = stamping_leader();
    let now = at("2026-01-01T00:00:10Z");
    let run = buildrun(
        "r1",
        "uid-1",
        "5",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:09Z")),
        json!({}),
    );
    let actions = state.applied(kind(BUILDRUN), &run, now);
    assert!(
        matches!(&actions[..], [Action::Stamp { change: StampChange::Set(stamp), .. }] if *stamp == at("2026-01-01T00:00:12Z")),
        "{actions:?}"
    );
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T00:00:12Z")));
    assert_eq!(state.due(at("2026-01-01T00:00:11.999Z")), []);
    let actions = state.due(at("2026-01-01T00:00:12Z"));
    match &actions[..] {
        [
            Action::Delete {
                key,
                uid,
                resource_version,
                reason: Reason::Ttl,
                eligible_at,
                event_target,
                policy: None,
                ledger: None,
            },
        ] => {
            assert_eq!(
                (&*key.name, &**uid, &**resource_version),
                ("r1", "uid-1", "5")
            );
            assert_eq!(*eligible_at, at("2026-01-01T00:00:12Z"));
            assert_eq!(
                (event_target.kind.as_str(), event_target.name.as_str()),
                ("Build", "app")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        state.due(at("2026-01-01T00:01:00Z")),
        [],
        "a DELETE is already on its way"
    );
}

#[test]
fn failed_runs_use_the_failed_ttl() {
    let mut state = leader();
    let run = buildrun(
        "r1",
        "u",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("False", "2026-01-01T00:00:00Z")),
        json!({}),
    );
    state.applied(kind(BUILDRUN), &run, at("2026-01-01T00:00:01Z"));
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T00:01:00Z")));
}

#[test]
fn never_deletes_a_running_object_even_past_an_expires_at() {
    let mut state = leader();
    let run = buildrun(
        "r1",
        "u",
        "1",
        "2026-01-01T00:00:00Z",
        None,
        json!({"metadata": {"annotations": {"retention.dev/ttl": "1s"}}}),
    );
    state.applied(kind(BUILDRUN), &run, at("2026-01-01T00:00:05Z"));
    assert_eq!(state.due(at("2026-01-02T00:00:00Z")), []);
    assert_eq!(state.next_deadline(), None);
}

#[test]
fn keep_and_objects_being_deleted_are_left_alone() {
    let mut state = leader();
    let kept = buildrun(
        "kept",
        "u1",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({"metadata": {"annotations": {"retention.dev/keep": "true"}}}),
    );
    let going = buildrun(
        "going",
        "u2",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:01Z", "finalizers": ["example.com/hold"]}}),
    );
    state.applied(kind(BUILDRUN), &kept, at("2026-01-01T00:00:01Z"));
    state.applied(kind(BUILDRUN), &going, at("2026-01-01T00:00:01Z"));
    assert_eq!(state.due(at("2026-01-02T00:00:00Z")), []);
}

#[test]
fn keep_added_before_expiry_cancels_the_deletion() {
    let mut state = leader();
    let finished = Some(("True", "2026-01-01T00:00:00Z"));
    state.applied(
        kind(BUILDRUN),
        &buildrun("r", "u", "1", "2026-01-01T00:00:00Z", finished, json!({})),
        at("2026-01-01T00:00:01Z"),
    );
    let kept = buildrun(
        "r",
        "u",
        "2",
        "2026-01-01T00:00:00Z",
        finished,
        json!({"metadata": {"annotations": {"retention.dev/keep": "true"}}}),
    );
    state.applied(kind(BUILDRUN), &kept, at("2026-01-01T00:00:02Z"));
    assert_eq!(state.due(at("2026-01-02T00:00:00Z")), []);
}

#[test]
fn a_recreated_object_is_judged_as_itself() {
    let mut state = leader();
    let old = buildrun(
        "r",
        "old-uid",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({}),
    );
    state.applied(kind(BUILDRUN), &old, at("2026-01-01T00:00:01Z"));
    state.removed(kind(BUILDRUN), "ns", "r");
    let new = buildrun("r", "new-uid", "9", "2026-01-01T00:00:02Z", None, json!({}));
    state.applied(kind(BUILDRUN), &new, at("2026-01-01T00:00:02Z"));
    assert_eq!(
        state.due(at("2026-01-01T00:10:00Z")),
        [],
        "the new run has not finished"
    );
}

#[test]
fn a_conflict_is_rejudged_from_the_watch_and_retried_only_after_a_backoff() {
    let mut state = leader();
    let run = buildrun(
        "r",
        "u",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({}),
    );
    state.applied(kind(BUILDRUN), &run, at("2026-01-01T00:00:01Z"));
    let actions = state.due(at("2026-01-01T00:00:05Z"));
    let Action::Delete { key, .. } = &actions[0] else {
        panic!()
    };
    let warnings = state.delete_failed(key, Failure::Conflict, at("2026-01-01T00:00:05Z"));
    assert_eq!(warnings, [], "a conflict is expected, never reported");
    assert_eq!(state.due(at("2026-01-01T00:00:05.5Z")), []);
    let newer = buildrun(
        "r",
        "u",
        "2",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({}),
    );
    state.applied(kind(BUILDRUN), &newer, at("2026-01-01T00:00:05.5Z"));
    let actions = state.due(at("2026-01-01T00:00:05.5Z"));
    assert!(
        matches!(&actions[..], [Action::Delete { resource_version, .. }] if &**resource_version == "2"),
        "the newer version is judged at once: {actions:?}"
    );
}

#[test]
fn jobs_record_their_events_on_their_owner() {
    let mut state = leader();
    let job = object(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "nightly-1", "namespace": "ns", "uid": "job-uid", "resourceVersion": "3",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": {"retention.dev/ttl-after-failed": "2s", "retention.dev/ttl-after-succeeded": "1h"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cron-uid"}]},
        "status": {"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}}),
    );
    state.applied(kind(JOB), &job, at("2026-01-01T00:00:01Z"));
    match &state.due(at("2026-01-01T00:00:03Z"))[..] {
        [Action::Delete { event_target, .. }] => {
            assert_eq!(
                (event_target.kind.as_str(), event_target.name.as_str()),
                ("CronJob", "nightly")
            );
            assert_eq!(event_target.uid.as_deref(), Some("cron-uid"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn preconditions_carry_the_uid_exactly_as_the_server_sent_it() {
    for uid in [
        "6f1c2a4e-9b3d-4c2e-8f7a-1d2e3f4a5b6c",
        "6F1C2A4E-9B3D-4C2E-8F7A-1D2E3F4A5B6C",
        "not-a-uuid",
    ] {
        let mut state = leader();
        let run = buildrun(
            "r",
            uid,
            "7",
            "2026-01-01T00:00:00Z",
            Some(("True", "2026-01-01T00:00:00Z")),
            json!({}),
        );
        state.applied(kind(BUILDRUN), &run, at("2026-01-01T00:00:01Z"));
        match &state.due(at("2026-01-01T00:01:00Z"))[..] {
            [
                Action::Delete {
                    uid: sent,
                    resource_version,
                    ..
                },
            ] => {
                assert_eq!((sent.as_str(), resource_version.as_str()), (uid, "7"));
            }
            other => panic!("{other:?}"),
        }
    }
}
