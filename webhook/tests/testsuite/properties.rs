//! Property tests: whatever arrives — arbitrary bytes, arbitrary JSON, reviews wrapping
//! arbitrary objects full of retention-looking fields — the handler answers 200 or 400 with a
//! review, and never panics; nor does the model (`OwnSettings::read`, expiry, progress) on such
//! objects. 400 cases each in `make test`; `make chaos` sets `PROPTEST_CASES=1000000`.

use crate::support;

use std::sync::Arc;

use axum::http::StatusCode;
use kube_retention_common::kinds::Registry;
use kube_retention_common::{Expiry, OwnSettings};
use kube_retention_webhook::Context;
use kube_retention_webhook::review::{Hook, handle};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use support::{FakeParents, review};

fn context() -> Context {
    Context::new(Arc::new(FakeParents::with_fixtures()))
}

fn answer(body: &[u8]) -> Vec<StatusCode> {
    // Timers: every review has its deadline.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let context = context();
    [Hook::Validate, Hook::Mutate]
        .into_iter()
        .map(|hook| {
            let (status, review) = runtime.block_on(handle(&context, hook, body));
            assert!(review.response.is_some());
            status
        })
        .collect()
}

/// JSON trees whose keys are the ones the model looks at, so arbitrary values land in them.
fn json_tree() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "spec",
        "status",
        "metadata",
        "annotations",
        "labels",
        "retention",
        "build",
        "name",
        "ttlAfterSucceeded",
        "ttlAfterFailed",
        "succeededLimit",
        "failedLimit",
        "atBuildDeletion",
        "conditions",
        "type",
        "completionTime",
        "phase",
        "retention.dev/ttl",
        "retention.dev/keep",
        "retention.dev/expires-at",
        "retention.dev/stamped",
        "retention.dev/ttl-after-finished",
        "successfulBuildTTLSeconds",
        "openshift.io/build-config.name",
        "containerStatuses",
        "ownerReferences",
        "uid",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[0-9.a-zµ -]{0,12}".prop_map(Value::String),
        Just(json!("True")),
        Just(json!("Succeeded")),
        Just(json!("2026-01-01T00:00:00Z")),
        Just(json!("hello")),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|pairs| Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

/// 400 cases, or `PROPTEST_CASES` (the long form fuzzes with a million).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(400);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const KINDS: [(&str, &str, &str); 7] = [
    ("shipwright.io", "v1beta1", "Build"),
    ("shipwright.io", "v1beta1", "BuildRun"),
    ("build.openshift.io", "v1", "Build"),
    ("build.openshift.io", "v1", "BuildConfig"),
    ("batch", "v1", "Job"),
    ("", "v1", "Pod"),
    ("", "v1", "ConfigMap"),
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_model_reads_any_object_without_panicking(
        tree in json_tree(),
        kind in prop::sample::select(KINDS.to_vec()),
    ) {
        let mut object = if tree.is_object() { tree } else { json!({"spec": tree}) };
        let api_version = if kind.0.is_empty() { kind.1.to_owned() } else { format!("{}/{}", kind.0, kind.1) };
        object["apiVersion"] = json!(api_version);
        object["kind"] = json!(kind.2);
        let now = jiff::Timestamp::UNIX_EPOCH;
        let (policy, _errors) = OwnSettings::read(&object);
        let expiry = Expiry::with_policy(&policy, &object, now);
        let _ = expiry.stamp_change(&policy.annotations);
        let _ = Registry::progress_of(&object);
    }

    #[test]
    fn arbitrary_bytes_get_400_or_200(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for status in answer(&body) {
            prop_assert!(status == StatusCode::BAD_REQUEST || status == StatusCode::OK);
        }
    }

    #[test]
    fn arbitrary_json_gets_an_answer(value in json_tree()) {
        answer(&serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn reviews_of_arbitrary_objects_get_200(
        mut object in json_tree(),
        kind in prop::sample::select(KINDS.to_vec()),
        operation in prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT"]),
        old in proptest::option::of(json_tree()),
    ) {
        if !object.is_object() {
            object = json!({"spec": object});
        }
        // Metadata is typed (the API server decodes it before admission): keep it well-formed
        // but let the annotations carry arbitrary text.
        let annotations: Map<String, Value> = object
            .get("annotations")
            .and_then(Value::as_object)
            .map(|map| map.iter().map(|(k, v)| (k.clone(), Value::String(v.to_string()))).collect())
            .unwrap_or_default();
        object["metadata"] = json!({"name": "x", "annotations": annotations});
        let old = old.map(|mut old| { if !old.is_object() { old = json!({}); } old["metadata"] = json!({"name": "x"}); old });
        let body = review(kind.0, kind.1, kind.2, operation, &object, old.as_ref());
        for status in answer(&serde_json::to_vec(&body).unwrap()) {
            prop_assert_eq!(status, StatusCode::OK);
        }
    }
}
