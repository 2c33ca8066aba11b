//! The webhook's HTTP surface, driven with `oneshot` requests and JSON fixtures: no cluster, no
//! TLS, a fixed set of parent objects.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use support::{apply_patch, fixture, review, send};

#[tokio::test]
async fn denies_a_build_naming_both_errors() {
    let (status, body) = send("/validate", &fixture("validate-build-two-errors.json")).await;
    assert_eq!(status, StatusCode::OK);
    let response = &body["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.retention.ttlAfterFailed: \"1d\" is not a duration"),
        "{message}"
    );
    assert!(
        message.contains("spec.retention.succeededLimit: 101 is above the limit of 100"),
        "{message}"
    );
    let causes = response["status"]["details"]["causes"].as_array().unwrap();
    let fields: Vec<&str> = causes
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.retention.ttlAfterFailed",
            "spec.retention.succeededLimit"
        ]
    );
}

#[tokio::test]
async fn admits_valid_settings_without_a_patch() {
    let mut body = fixture("validate-build-two-errors.json");
    body["request"]["object"]["spec"]["retention"] =
        json!({"ttlAfterFailed": "36h", "succeededLimit": 100});
    let (status, body) = send("/validate", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"].get("patch").is_none());
}

#[tokio::test]
async fn buildrun_inherits_the_build_ttls_it_does_not_set_and_is_owned_by_it() {
    let request = fixture("mutate-buildrun-of-build.json");
    let (status, body) = send("/mutate", &request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"]["patchType"], "JSONPatch");
    let patched = apply_patch(&request["request"]["object"], &body["response"]);
    assert_eq!(
        patched["spec"]["retention"],
        json!({"ttlAfterFailed": "5m", "ttlAfterSucceeded": "1.5h"})
    );
    assert_eq!(
        patched["metadata"]["ownerReferences"],
        json!([{"apiVersion": "shipwright.io/v1beta1", "kind": "Build", "name": "hello",
                "uid": "0f6f3b0e-7e0c-4b8e-a1f1-6c1d1d7b9e11"}])
    );
    assert_eq!(
        patched["metadata"]["labels"]["retention.dev/managed"],
        "true"
    );
    // Not finished yet: no expiry to stamp.
    assert!(
        patched["metadata"].get("annotations").is_none(),
        "{patched}"
    );

    // Re-invoked on its own output, the webhook has nothing more to add.
    let mut again = request.clone();
    again["request"]["object"] = patched;
    let (_, body) = send("/mutate", &again).await;
    assert!(body["response"].get("patch").is_none(), "{body}");
}

#[tokio::test]
async fn a_missing_build_admits_the_run_unchanged_with_a_warning() {
    let mut request = fixture("mutate-buildrun-of-build.json");
    request["request"]["object"]["spec"]["build"]["name"] = json!("nobody");
    request["request"]["object"]["spec"]["retention"] = json!(null);
    let (status, body) = send("/mutate", &request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"].get("patch").is_none(), "{body}");
    let warnings = body["response"]["warnings"].as_array().unwrap();
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("Build \"nobody\" not found in team-a"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn warns_when_the_controller_may_not_delete_the_kind_given_a_ttl() {
    use std::sync::Arc;
    let context = || {
        kube_retention_webhook::Context::new(Arc::new(support::FakeParents::with_fixtures()))
            .with_access(Arc::new(support::NoSecrets))
    };
    let warnings = |body: &Value| body["response"]["warnings"].clone();
    let annotated = |kind: &str| {
        json!({"apiVersion": "v1", "kind": kind,
               "metadata": {"name": "x", "annotations": {"retention.dev/ttl": "10m"}}})
    };
    let secret = review("", "v1", "Secret", "CREATE", &annotated("Secret"), None);
    let (_, body) = support::send_to(context(), "/mutate", &secret).await;
    assert_eq!(
        warnings(&body),
        json!(["kube-retention cannot delete this: grant its controller patch, delete on secrets"])
    );
    assert!(
        !body["response"]["patch"].is_null(),
        "still stamped: {body}"
    );

    let config_map = review(
        "",
        "v1",
        "ConfigMap",
        "CREATE",
        &annotated("ConfigMap"),
        None,
    );
    let (_, body) = support::send_to(context(), "/mutate", &config_map).await;
    assert_eq!(warnings(&body), Value::Null, "{body}");

    let plain = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    let unannotated = review("", "v1", "Secret", "CREATE", &plain, None);
    let (_, body) = support::send_to(context(), "/mutate", &unannotated).await;
    assert_eq!(
        warnings(&body),
        Value::Null,
        "no settings, nothing to warn of"
    );

    let mut namespace = review(
        "",
        "v1",
        "Namespace",
        "CREATE",
        &annotated("Namespace"),
        None,
    );
    namespace["request"]["namespace"] = Value::Null;
    let (_, body) = support::send_to(context(), "/mutate", &namespace).await;
    let warning = warnings(&body)[0].as_str().unwrap_or_default().to_owned();
    assert!(
        warning.contains("does not delete cluster-scoped objects"),
        "{warning}"
    );
}

#[tokio::test]
async fn stamps_expires_at_from_a_creation_ttl() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "c", "annotations": {"retention.dev/ttl": "10m"}}});
    let request = review("", "v1", "ConfigMap", "CREATE", &object, None);
    let before = jiff::Timestamp::now();
    let (_, body) = send("/mutate", &request).await;
    let patched = apply_patch(&object, &body["response"]);
    let stamped: jiff::Timestamp = patched["metadata"]["annotations"]["retention.dev/expires-at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let expected = before + jiff::SignedDuration::from_mins(10);
    let off = stamped.duration_since(expected).abs();
    assert!(
        off < jiff::SignedDuration::from_secs(2),
        "{stamped} vs {expected}"
    );
}

#[tokio::test]
async fn restamps_a_finished_object_when_its_ttl_changes() {
    let finished = |ttl: &str, expires: &str| {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z",
                            "labels": {"retention.dev/managed": "true"},
                            "annotations": {"retention.dev/ttl-after-finished": ttl,
                                            "retention.dev/expires-at": expires, "retention.dev/stamped": expires}},
               "status": {"completionTime": "2026-01-01T01:00:00Z",
                          "conditions": [{"type": "Complete", "status": "True"}]}})
    };
    let old = finished("1h", "2026-01-01T02:00:00Z");
    let new = finished("2h", "2026-01-01T02:00:00Z");
    let request = review("batch", "v1", "Job", "UPDATE", &new, Some(&old));
    let (_, body) = send("/mutate", &request).await;
    let patched = apply_patch(&new, &body["response"]);
    assert_eq!(
        patched["metadata"]["annotations"]["retention.dev/expires-at"],
        "2026-01-01T03:00:00Z"
    );
    assert_eq!(
        patched["metadata"]["annotations"]["retention.dev/stamped"],
        "2026-01-01T03:00:00Z"
    );

    let unchanged = review("batch", "v1", "Job", "UPDATE", &old, Some(&old));
    let (_, body) = send("/mutate", &unchanged).await;
    assert!(body["response"].get("patch").is_none(), "{body}");
}

#[tokio::test]
async fn removes_its_stamp_when_the_update_removes_the_ttl_but_never_a_users_deadline() {
    let job = |annotations: Value| {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z",
                            "labels": {"retention.dev/managed": "true"}, "annotations": annotations},
               "status": {"completionTime": "2026-01-01T01:00:00Z",
                          "conditions": [{"type": "Complete", "status": "True"}]}})
    };
    let stamp = "2026-01-01T02:00:00Z";
    let old = job(json!({"retention.dev/ttl-after-finished": "1h",
        "retention.dev/expires-at": stamp, "retention.dev/stamped": stamp, "team": "a"}));
    let new = job(
        json!({"retention.dev/expires-at": stamp, "retention.dev/stamped": stamp, "team": "a"}),
    );
    let request = review("batch", "v1", "Job", "UPDATE", &new, Some(&old));
    let (_, body) = send("/mutate", &request).await;
    let patched = apply_patch(&new, &body["response"]);
    assert_eq!(patched["metadata"]["annotations"], json!({"team": "a"}));

    let mine = job(json!({"retention.dev/expires-at": "2026-02-01T00:00:00Z",
        "retention.dev/stamped": stamp}));
    let request = review("batch", "v1", "Job", "UPDATE", &mine, Some(&old));
    let (_, body) = send("/mutate", &request).await;
    assert!(body["response"].get("patch").is_none(), "{body}");
}

#[tokio::test]
async fn leaves_objects_without_retention_settings_alone() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    for hook in ["/mutate", "/validate"] {
        let (status, body) = send(hook, &review("", "v1", "Pod", "CREATE", &object, None)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["response"]["allowed"], true);
        assert!(body["response"].get("patch").is_none());
    }
}

#[tokio::test]
async fn malformed_reviews_get_a_clear_400() {
    for (body, expected) in [
        ("{", "malformed AdmissionReview"),
        ("[]", "malformed AdmissionReview"),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
            "AdmissionReview has no request",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}"#,
            "malformed AdmissionReview",
        ),
    ] {
        let response = support::router()
            .oneshot_raw(
                Request::post("/validate")
                    .header("content-type", "application/json")
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await;
        assert_eq!(response.0, StatusCode::BAD_REQUEST, "{body}");
        let review: Value = serde_json::from_slice(&response.1).unwrap();
        assert_eq!(review["response"]["allowed"], false);
        let message = review["response"]["status"]["message"].as_str().unwrap();
        assert!(message.starts_with(expected), "{body}: {message}");
    }
}

#[tokio::test]
async fn refuses_oversized_bodies() {
    let body = vec![b' '; 5 * 1024 * 1024];
    let response = support::router()
        .oneshot_raw(Request::post("/validate").body(Body::from(body)).unwrap())
        .await;
    assert_eq!(response.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn serves_health_and_metrics() {
    let router = support::router();
    let (_, _) = send("/validate", &fixture("validate-build-two-errors.json")).await;
    for path in ["/healthz", "/readyz"] {
        let (status, body) = router
            .clone()
            .oneshot_raw(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!((status, body.as_ref()), (StatusCode::OK, b"ok".as_ref()));
    }
    let _ = router
        .clone()
        .oneshot_raw(
            Request::post("/validate")
                .body(Body::from(
                    serde_json::to_vec(&fixture("validate-build-two-errors.json")).unwrap(),
                ))
                .unwrap(),
        )
        .await;
    let (status, body) = router
        .oneshot_raw(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains(r#"kube_retention_webhook_admission_requests_total{hook="validate",kind="Build",operation="CREATE",outcome="Denied"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("kube_retention_webhook_admission_duration_seconds_bucket"),
        "{text}"
    );
}

#[tokio::test]
async fn while_draining_it_is_not_ready_and_closes_each_connection_after_answering() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use tower::ServiceExt;

    let context = Arc::new(kube_retention_webhook::Context::new(Arc::new(
        support::FakeParents::with_fixtures(),
    )));
    let router = kube_retention_webhook::router::router(
        context.clone(),
        kube_retention_webhook::router::DEFAULT_MAX_BODY_BYTES,
    );
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let serving = router.clone().oneshot(get("/readyz")).await.unwrap();
    assert_eq!(serving.status(), StatusCode::OK);
    assert!(serving.headers().get("connection").is_none());

    context.draining.store(true, Ordering::Relaxed);
    let draining = router.clone().oneshot(get("/readyz")).await.unwrap();
    assert_eq!(draining.status(), StatusCode::SERVICE_UNAVAILABLE);
    let review = serde_json::to_vec(&fixture("validate-build-two-errors.json")).unwrap();
    let answered = router
        .oneshot(Request::post("/validate").body(Body::from(review)).unwrap())
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK, "still answering reviews");
    assert_eq!(answered.headers()["connection"], "close");
}

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
    use std::sync::Arc;
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
