//! The webhook's HTTP serving, driven with `oneshot` requests: malformed and oversized bodies
//! get clear answers, health and metrics are served, and draining closes each connection after
//! its answer.

use crate::support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use support::{fixture, send};

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
        text.contains(r#"kube_retention_webhook_admission_requests_total{hook="validate",kind="Build",operation="CREATE",outcome="denied"} 1"#),
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
