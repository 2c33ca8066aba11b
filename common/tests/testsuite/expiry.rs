//! Expiry computation: the value of `retention.dev/expires-at`.

use kube_retention_common::expiry::StampChange;
use kube_retention_common::{Expiry, OwnSettings};
use serde_json::{Value, json};

fn now() -> jiff::Timestamp {
    "2026-06-01T12:00:00Z".parse().unwrap()
}

fn job(annotations: Value, status: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"creationTimestamp": "2026-06-01T10:00:00Z", "annotations": annotations},
           "status": status})
}

fn failed() -> Value {
    json!({"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": "2026-06-01T11:00:00Z"}]})
}

fn succeeded() -> Value {
    json!({"completionTime": "2026-06-01T11:30:00Z",
           "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-06-01T11:30:00Z"}]})
}

fn at(text: &str) -> Expiry {
    Expiry::At(text.parse().unwrap())
}

#[test]
fn counts_ttl_after_an_outcome_from_the_finish_time() {
    let annotations =
        json!({"retention.dev/ttl-after-failed": "2s", "retention.dev/ttl-after-succeeded": "1h"});
    assert_eq!(
        Expiry::of(&job(annotations.clone(), failed()), now()),
        at("2026-06-01T11:00:02Z")
    );
    assert_eq!(
        Expiry::of(&job(annotations.clone(), succeeded()), now()),
        at("2026-06-01T12:30:00Z")
    );
    assert_eq!(
        Expiry::of(&job(annotations, json!({})), now()),
        Expiry::NotYet
    );
}

#[test]
fn counts_ttl_from_creation_and_takes_the_earliest() {
    let annotations = json!({"retention.dev/ttl": "10m"});
    assert_eq!(
        Expiry::of(&job(annotations, json!({})), now()),
        at("2026-06-01T10:10:00Z")
    );
    let both = json!({"retention.dev/ttl": "3h", "retention.dev/ttl-after-finished": "1s"});
    assert_eq!(
        Expiry::of(&job(both, failed()), now()),
        at("2026-06-01T11:00:01Z")
    );
}

#[test]
fn an_object_being_created_counts_from_now() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"annotations": {"retention.dev/ttl": "10m"}}});
    assert_eq!(Expiry::of(&object, now()), at("2026-06-01T12:10:00Z"));
    assert_eq!(
        Expiry::of(&object, now()).annotation().as_deref(),
        Some("2026-06-01T12:10:00Z")
    );
}

#[test]
fn keep_wins_and_no_ttl_leaves_expires_at_to_the_user() {
    let kept = json!({"retention.dev/ttl": "1s", "retention.dev/keep": "true"});
    assert_eq!(Expiry::of(&job(kept, failed()), now()), Expiry::Keep);
    let manual = json!({"retention.dev/expires-at": "2027-01-01T00:00:00Z"});
    let deadline = Expiry::of(&job(manual, failed()), now());
    assert_eq!(
        deadline,
        Expiry::Deadline("2027-01-01T00:00:00Z".parse().unwrap())
    );
    assert_eq!(deadline.annotation(), None);
    assert_eq!(
        deadline.deadline(),
        Some("2027-01-01T00:00:00Z".parse().unwrap())
    );
}

/// The first defect of "never delete against intent": a TTL removed after the stamp must not
/// leave the stamp behind as a deadline.
#[test]
fn a_stamp_without_a_ttl_behind_it_is_stale_and_never_a_deadline() {
    let stamp = "2026-06-01T11:00:12Z";
    let stale = json!({"retention.dev/expires-at": stamp, "retention.dev/stamped": stamp});
    let (policy, errors) = OwnSettings::read(&job(stale.clone(), succeeded()));
    assert_eq!(errors, []);
    let expiry = Expiry::of(&job(stale, succeeded()), now());
    assert_eq!(expiry, Expiry::Never);
    assert_eq!(expiry.deadline(), None);
    assert_eq!(
        expiry.stamp_change(&policy.annotations),
        Some(StampChange::Remove(stamp.parse().unwrap()))
    );
}

#[test]
fn a_changed_ttl_restamps_and_a_current_stamp_is_left_alone() {
    let old = "2026-06-01T11:00:12Z";
    let extended = json!({"retention.dev/ttl-after-succeeded": "1m",
        "retention.dev/expires-at": old, "retention.dev/stamped": old});
    let object = job(extended, succeeded());
    let (policy, _) = OwnSettings::read(&object);
    let expiry = Expiry::of(&object, now());
    assert_eq!(expiry, at("2026-06-01T11:31:00Z"));
    assert_eq!(
        expiry.stamp_change(&policy.annotations),
        Some(StampChange::Set("2026-06-01T11:31:00Z".parse().unwrap()))
    );
    let current = "2026-06-01T11:31:00Z";
    let stamped = json!({"retention.dev/ttl-after-succeeded": "1m",
        "retention.dev/expires-at": current, "retention.dev/stamped": current});
    let (policy, _) = OwnSettings::read(&job(stamped, succeeded()));
    assert_eq!(expiry.stamp_change(&policy.annotations), None);
}

#[test]
fn a_deadline_the_user_wrote_over_a_stamp_is_theirs() {
    let mine = json!({"retention.dev/expires-at": "2027-01-01T00:00:00Z",
        "retention.dev/stamped": "2026-06-01T11:00:12Z"});
    let object = job(mine, failed());
    let (policy, _) = OwnSettings::read(&object);
    let expiry = Expiry::of(&object, now());
    assert_eq!(
        expiry,
        Expiry::Deadline("2027-01-01T00:00:00Z".parse().unwrap())
    );
    assert_eq!(expiry.stamp_change(&policy.annotations), None);
}

#[test]
fn a_run_that_is_running_again_loses_its_stamp_but_kept_objects_are_untouched() {
    let stamp = "2026-06-01T11:00:12Z";
    let annotations = json!({"retention.dev/ttl-after-finished": "12s",
        "retention.dev/expires-at": stamp, "retention.dev/stamped": stamp});
    let object = job(annotations, json!({}));
    let (policy, _) = OwnSettings::read(&object);
    let expiry = Expiry::of(&object, now());
    assert_eq!(expiry, Expiry::NotYet);
    assert_eq!(
        expiry.stamp_change(&policy.annotations),
        Some(StampChange::Remove(stamp.parse().unwrap()))
    );
    assert_eq!(Expiry::Keep.stamp_change(&policy.annotations), None);
}

#[test]
fn buildruns_use_their_retention_fields() {
    let run = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
        "metadata": {"creationTimestamp": "2026-06-01T10:00:00Z"},
        "spec": {"build": {"name": "b"}, "retention": {"ttlAfterSucceeded": "3s"}},
        "status": {"completionTime": "2026-06-01T11:00:00Z",
                   "conditions": [{"type": "Succeeded", "status": "True", "lastTransitionTime": "2026-06-01T11:00:01Z"}]}});
    assert_eq!(Expiry::of(&run, now()), at("2026-06-01T11:00:03Z"));
}

#[test]
fn sub_second_ttls_keep_their_precision() {
    let annotations = json!({"retention.dev/ttl-after-failed": "1.5s"});
    assert_eq!(
        Expiry::of(&job(annotations, failed()), now())
            .annotation()
            .as_deref(),
        Some("2026-06-01T11:00:01.5Z")
    );
}

#[test]
fn a_snooze_pushes_the_stamp_and_a_users_own_deadline() {
    let snoozed = json!({"retention.dev/ttl-after-failed": "2s",
                         "retention.dev/snoozed-until": "2026-06-03T00:00:00Z"});
    let expiry = Expiry::of(&job(snoozed, failed()), now());
    assert_eq!(expiry, at("2026-06-03T00:00:00Z"));
    assert_eq!(
        expiry.annotation().as_deref(),
        Some("2026-06-03T00:00:00Z"),
        "the stamp shows the snoozed deadline"
    );
    let own = json!({"retention.dev/expires-at": "2026-06-02T00:00:00Z",
                     "retention.dev/snoozed-until": "2026-06-03T00:00:00Z"});
    assert_eq!(
        Expiry::of(&job(own, failed()), now()),
        Expiry::Deadline("2026-06-03T00:00:00Z".parse().unwrap())
    );
    let running = json!({"retention.dev/ttl-after-failed": "2s",
                         "retention.dev/snoozed-until": "2026-06-03T00:00:00Z"});
    assert_eq!(Expiry::of(&job(running, json!({})), now()), Expiry::NotYet);
}
