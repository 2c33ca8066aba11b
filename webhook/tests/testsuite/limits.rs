//! The bounds on admission work through the router: a review not answered by its deadline gets
//! an explicit answer (a validation refused with 504, a mutation admitted unchanged with a
//! warning), a body that never finishes is cut off with 408, and past the bound on admissions
//! in flight a request is refused unread with 503; each counted by its outcome. Time is paused:
//! a deadline passes as soon as nothing else can happen, and no assertion is about time.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use futures::StreamExt;
use kube_retention_common::kinds::Resource;
use kube_retention_webhook::Context;
use kube_retention_webhook::access::Request as Question;
use kube_retention_webhook::access::Subject;
use kube_retention_webhook::compilations::CompileLimits;
use kube_retention_webhook::limits::Limits;
use kube_retention_webhook::parents::{Lookup, Parents};
use kube_retention_webhook::router::{DEFAULT_MAX_BODY_BYTES, router};
use kube_retention_webhook::writers::{Allowed, WriterAccess};
use serde_json::{Value, json};
use support::{CONTROLLER, FakeParents, TestRouter, fixture, review};

/// Never answers whether a writer may: the API server gone quiet.
struct Stalled;

impl WriterAccess for Stalled {
    fn allowed<'a>(&'a self, _writer: &'a Subject, _request: &'a Question) -> Allowed<'a> {
        Box::pin(std::future::pending())
    }
}

/// Never answers a parent's lookup.
struct StalledParents;

impl Parents for StalledParents {
    fn get<'a>(&'a self, _kind: &'a Resource, _namespace: &'a str, _name: &'a str) -> Lookup<'a> {
        Box::pin(std::future::pending())
    }
}

fn annotated_configmap() -> Value {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"retention.dev/ttl": "10m"}}});
    review("", "v1", "ConfigMap", "CREATE", &object, None)
}

fn post(path: &str, review: &Value) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap()
}

fn metrics(context: &Context) -> String {
    context.metrics.encode()
}

#[tokio::test(start_paused = true)]
async fn a_validation_not_answered_by_its_deadline_is_refused_saying_so() {
    let context = Arc::new(
        Context::new(Arc::new(FakeParents::with_fixtures()))
            .with_writers(Arc::new(Stalled), CONTROLLER),
    );
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    let (status, body) = router
        .oneshot_raw(post("/validate", &annotated_configmap()))
        .await;
    assert_eq!(status, StatusCode::OK);
    let review: Value = serde_json::from_slice(&body).unwrap();
    let response = &review["response"];
    assert_eq!(response["uid"], "00000000-0000-0000-0000-000000000001");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 504);
    assert_eq!(response["status"]["reason"], "Timeout");
    assert_eq!(
        response["status"]["message"],
        "kube-retention did not finish checking this write within its limit of 2s \
         (--admission-timeout): try again"
    );
    let text = metrics(&context);
    assert!(
        text.contains(r#"admission_requests_total{hook="validate",kind="ConfigMap",operation="CREATE",outcome="timeout"} 1"#),
        "{text}"
    );
    assert_eq!(context.limits.in_flight(), 0, "its place is given back");
}

#[tokio::test(start_paused = true)]
async fn a_mutation_not_answered_by_its_deadline_admits_unchanged_with_a_warning() {
    let context = Arc::new(Context::new(Arc::new(StalledParents)));
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    let request = fixture("mutate-buildrun-of-build.json");
    let (status, body) = router.oneshot_raw(post("/mutate", &request)).await;
    assert_eq!(status, StatusCode::OK);
    let review: Value = serde_json::from_slice(&body).unwrap();
    let response = &review["response"];
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(
        response["warnings"],
        json!([
            "kube-retention did not finish mutating this write within its limit of 2s \
                (--admission-timeout): admitted unchanged (no TTLs copied, no \
                retention.dev/expires-at stamped, no retention.dev/managed label)"
        ])
    );
    let text = metrics(&context);
    assert!(
        text.contains(r#"admission_requests_total{hook="mutate",kind="BuildRun",operation="CREATE",outcome="timeout"} 1"#),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_finishes_is_cut_off_at_the_deadline() {
    let context = Arc::new(Context::new(Arc::new(FakeParents::with_fixtures())));
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    // A first chunk, then nothing more: a slowloris client.
    let first: Result<Bytes, std::io::Error> = Ok(Bytes::from_static(b"{\"apiVersion\": "));
    let trickle = futures::stream::iter([first]).chain(futures::stream::pending());
    let request = Request::post("/validate")
        .body(Body::from_stream(trickle))
        .unwrap();
    let (status, body) = router.oneshot_raw(request).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(
        review["response"]["status"]["message"],
        "reading the AdmissionReview: its body did not arrive within 2s (--admission-timeout)"
    );
    let text = metrics(&context);
    assert!(
        text.contains(r#"admission_requests_total{hook="validate",kind="unknown",operation="unknown",outcome="timeout"} 1"#),
        "{text}"
    );
    assert_eq!(context.limits.in_flight(), 0);
}

#[tokio::test]
async fn past_the_bound_in_flight_a_request_is_refused_unread_and_a_freed_place_is_used_again() {
    let limits = Limits::new(Duration::from_secs(3600), 2);
    let context = Arc::new(
        Context::new(Arc::new(FakeParents::with_fixtures()))
            .with_writers(Arc::new(Stalled), CONTROLLER)
            .with_limits(
                limits,
                CompileLimits {
                    at_once: 1,
                    ..CompileLimits::default()
                },
            ),
    );
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    let stalled: Vec<_> = (0..2)
        .map(|_| {
            let router = router.clone();
            tokio::spawn(async move {
                router
                    .oneshot_raw(post("/validate", &annotated_configmap()))
                    .await
            })
        })
        .collect();
    while context.limits.in_flight() < 2 {
        tokio::task::yield_now().await;
    }
    let (status, body) = router
        .clone()
        .oneshot_raw(post("/validate", &annotated_configmap()))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        String::from_utf8_lossy(&body),
        "kube-retention's webhook is answering 2 admissions already \
         (--max-admissions-in-flight): try again"
    );
    let text = metrics(&context);
    assert!(
        text.contains(r#"admission_requests_total{hook="validate",kind="unknown",operation="unknown",outcome="shed"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("kube_retention_webhook_admissions_in_flight 2"),
        "{text}"
    );
    for task in stalled {
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
    }
    assert_eq!(context.limits.in_flight(), 0);
    // A Build with invalid settings is denied before anyone is asked: answered, not stalled.
    let (status, body) = router
        .oneshot_raw(post(
            "/validate",
            &fixture("validate-build-two-errors.json"),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["response"]["status"]["code"], 422);
}
