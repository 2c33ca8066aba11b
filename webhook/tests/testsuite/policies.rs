//! Retention policies through the admission handler, driven with `oneshot` requests: invalid
//! policies are denied naming every field, and policies the controller cannot act on yet are
//! admitted with warnings that say why.

use crate::support;

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::json;
use support::{review, send};

#[tokio::test]
async fn denies_an_invalid_policy_naming_every_field() {
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "ClusterRetentionPolicy",
        "metadata": {"name": "p"},
        "spec": {"resources": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun"}],
                 "ttlAfterSucceeded": "1d", "succeededLimit": 0,
                 "finished": {"succeeded": "object.status.phase = 'Done'"},
                 "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}});
    let request = review(
        "retention.dev",
        "v1alpha1",
        "ClusterRetentionPolicy",
        "CREATE",
        &policy,
        None,
    );
    let (status, body) = send("/validate", &request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], false, "{body}");
    let fields: Vec<&str> = body["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.namespaceSelector.matchExpressions[0].values",
            "spec.ttlAfterSucceeded",
            "spec.succeededLimit",
            "spec.finished.succeeded"
        ]
    );
}

#[tokio::test]
async fn admits_a_policy_for_an_unserved_or_ungranted_kind_with_warnings() {
    let context =
        kube_retention_webhook::Context::new(Arc::new(support::FakeParents::with_fixtures()))
            .with_access(Arc::new(support::NoSecrets));
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "p"},
        "spec": {"resources": [{"apiVersion": "v1", "kind": "Secret"},
                               {"apiVersion": "e2e.retention.dev/v1", "kind": "Gadget"},
                               {"apiVersion": "v1", "kind": "ConfigMap"}],
                 "ttl": "1h"}});
    let request = review(
        "retention.dev",
        "v1alpha1",
        "RetentionPolicy",
        "CREATE",
        &policy,
        None,
    );
    let (_, body) = support::send_to(context, "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(
        body["response"]["warnings"],
        json!([
            "spec.resources[0]: kube-retention cannot act on Secret yet: grant its controller patch, delete on secrets",
            "spec.resources[1]: Gadget.e2e.retention.dev is not served by this cluster (e2e.retention.dev/v1): the policy is not Ready until it is"
        ])
    );
}

#[tokio::test]
async fn a_policys_ledger_sink_is_checked_like_a_cleaners() {
    let context =
        kube_retention_webhook::Context::new(Arc::new(support::FakeParents::with_fixtures()))
            .with_access(Arc::new(support::NoSecrets));
    let policy = |spec: serde_json::Value| {
        let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "p"}, "spec": spec});
        review(
            "retention.dev",
            "v1alpha1",
            "RetentionPolicy",
            "CREATE",
            &object,
            None,
        )
    };
    let jobs = json!([{"apiVersion": "batch/v1", "kind": "Job"}]);
    let loopback = policy(json!({"resources": jobs, "ttl": "1h",
                                 "sink": "http://127.0.0.1:9/", "archiveBeforeDelete": true}));
    let (_, body) = support::send_to(context, "/validate", &loopback).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(
        body["response"]["warnings"],
        json!([
            "spec.sink: \"http://127.0.0.1:9/\": 127.0.0.1 is a loopback address: refused by the sink policy; the controller will not deliver to it"
        ])
    );
    let (_, body) = send(
        "/validate",
        &policy(json!({"resources": jobs, "ttl": "1h", "sink": "ftp://archive.example/"})),
    )
    .await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.sink: \"ftp://archive.example/\" is not an http(s) URL"),
        "{message}"
    );
    let (_, body) = send(
        "/validate",
        &policy(json!({"resources": jobs, "ttl": "1h", "archiveBeforeDelete": true})),
    )
    .await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.archiveBeforeDelete: true needs spec.sink"),
        "{message}"
    );
}
