//! The webhook's HTTP surface, driven with `oneshot` requests and JSON fixtures: no cluster, no
//! TLS, a fixed set of parent objects.

use crate::support;

use axum::http::StatusCode;
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
