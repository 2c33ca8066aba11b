//! The notice ahead of a deadline in the controller's state: a Warning `RetentionExpiring` on the
//! object at its deadline less `notifyBefore` (a policy's, or the object's own
//! `retention.dev/notify-before`), once per deadline; again for a new deadline (a snooze); never
//! for an object that is kept or already due.

use crate::support;

use kube::api::DynamicObject;
use kube_retention_common::model::object_value;
use kube_retention_state::{Action, PolicyKey, State, Warning};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, leader, loaded_policy, object};

fn key() -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: "jobs".into(),
    }
}

/// A Job that succeeded at 00:00:00, version `version`, with `annotations`.
fn job(version: &str, annotations: Value) -> DynamicObject {
    object(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "uid-j",
                     "resourceVersion": version, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": annotations},
        "status": {"completionTime": "2026-01-01T00:00:00Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }))
}

fn judged(state: &mut State, object: &DynamicObject, now: &str) -> Vec<Action> {
    let value: Value = object_value(&state.kinds()[kind(JOB)].resource, object).unwrap();
    state.judged(kind(JOB), object, &value, None, at(now))
}

/// The notices among `actions`: their notes.
fn notices(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Warn {
                warning: Warning::Expiring,
                note,
                target,
                ..
            } => {
                assert_eq!((target.kind.as_str(), target.name.as_str()), ("Job", "j"));
                Some(note.clone())
            }
            _ => None,
        })
        .collect()
}

fn with_policy() -> State {
    let mut state = leader();
    state.policy_applied(
        key(),
        loaded_policy(json!({
            "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
            "ttlAfterSucceeded": "1h", "notifyBefore": "10m"})),
    );
    state
}

#[test]
fn a_policys_notice_goes_once_at_its_deadline_less_notify_before() {
    let mut state = with_policy();
    assert_eq!(
        notices(&judged(
            &mut state,
            &job("1", json!({})),
            "2026-01-01T00:00:01Z"
        )),
        [] as [String; 0]
    );
    assert_eq!(
        state.next_deadline(),
        Some(at("2026-01-01T00:50:00Z")),
        "it wakes for the notice first"
    );
    assert_eq!(
        notices(&state.due(at("2026-01-01T00:49:59Z"))),
        [] as [String; 0]
    );
    let sent = notices(&state.due(at("2026-01-01T00:50:00Z")));
    assert_eq!(
        sent,
        [
            "kube-retention deletes it at 2026-01-01T01:00:00Z (in 10m0s), by RetentionPolicy \
          ns/jobs; to keep it longer: kubectl retention snooze job/j -n ns <duration>"
        ]
    );
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T01:00:00Z")));
    // A new version of the same object with the same deadline: not sent again.
    let again = judged(
        &mut state,
        &job("2", json!({"unrelated": "edit"})),
        "2026-01-01T00:55:00Z",
    );
    assert_eq!(notices(&again), [] as [String; 0]);
    assert_eq!(
        notices(&state.due(at("2026-01-01T00:56:00Z"))),
        [] as [String; 0]
    );
    let gone = state.due(at("2026-01-01T01:00:00Z"));
    assert_eq!(deletes(&gone).len(), 1);
    assert_eq!(notices(&gone), [] as [String; 0]);
}

#[test]
fn a_snooze_moves_the_deadline_and_its_notice_comes_again() {
    let mut state = with_policy();
    judged(&mut state, &job("1", json!({})), "2026-01-01T00:00:01Z");
    assert_eq!(notices(&state.due(at("2026-01-01T00:50:00Z"))).len(), 1);
    let snoozed = job(
        "2",
        json!({"retention.dev/snoozed-until": "2026-01-02T00:00:00Z"}),
    );
    let actions = judged(&mut state, &snoozed, "2026-01-01T00:51:00Z");
    assert_eq!(notices(&actions), [] as [String; 0]);
    assert_eq!(deletes(&state.due(at("2026-01-01T01:00:00Z"))), []);
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T23:50:00Z")));
    let sent = notices(&state.due(at("2026-01-01T23:50:00Z")));
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].contains("at 2026-01-02T00:00:00Z (in 10m0s)"),
        "{sent:?}"
    );
    assert_eq!(deletes(&state.due(at("2026-01-02T00:00:00Z"))).len(), 1);
}

#[test]
fn the_objects_own_notify_before_wins_and_a_late_notice_goes_at_once() {
    let mut state = with_policy();
    // Seen first 55 minutes into its hour: its 30m notice is late, and goes at once.
    let own = job("1", json!({"retention.dev/notify-before": "30m"}));
    let actions = judged(&mut state, &own, "2026-01-01T00:55:00Z");
    assert_eq!(
        notices(&actions),
        [] as [String; 0],
        "the judgement itself sends nothing"
    );
    let sent = notices(&state.due(at("2026-01-01T00:55:00Z")));
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains("(in 5m0s)"), "{sent:?}");
}

#[test]
fn no_notice_for_what_is_kept_already_due_or_not_ours_to_delete() {
    let mut state = leader();
    let kept = job(
        "1",
        json!({"retention.dev/ttl-after-finished": "1h", "retention.dev/notify-before": "10m",
               "retention.dev/keep": "true"}),
    );
    judged(&mut state, &kept, "2026-01-01T00:00:01Z");
    assert_eq!(state.next_deadline(), None);
    assert_eq!(
        notices(&state.due(at("2026-01-01T00:55:00Z"))),
        [] as [String; 0]
    );
    // Seen only after its deadline: the DELETE, no notice.
    let due = job(
        "2",
        json!({"retention.dev/ttl-after-finished": "1h", "retention.dev/notify-before": "10m"}),
    );
    let mut actions = judged(&mut state, &due, "2026-01-01T02:00:00Z");
    actions.extend(state.due(at("2026-01-01T02:00:00Z")));
    assert_eq!(deletes(&actions).len(), 1);
    assert_eq!(notices(&actions), [] as [String; 0]);
    // A follower sends nothing; the leader it becomes does.
    let mut follower = with_policy();
    follower.set_leader(false, at("2026-01-01T00:00:01Z"));
    judged(&mut follower, &job("1", json!({})), "2026-01-01T00:00:01Z");
    assert_eq!(
        notices(&follower.due(at("2026-01-01T00:50:00Z"))),
        [] as [String; 0]
    );
    let led = follower.set_leader(true, at("2026-01-01T00:51:00Z"));
    assert_eq!(notices(&led).len(), 1);
}
