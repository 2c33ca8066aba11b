//! Expiry computation: the value of `retention.dev/expires-at`.

#![allow(clippy::unwrap_used)] // test helpers unwrap fixtures

use kube_retention_common::Expiry;
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
    assert_eq!(Expiry::of(&job(manual, failed()), now()), Expiry::Unmanaged);
    assert_eq!(Expiry::Unmanaged.annotation(), None);
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
