//! Shared by the webhook's router and property tests: the router over fixed parents, fixtures,
//! and helpers to build reviews and apply the patches they return.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses a subset

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kube_retention_common::kinds::Resource;
use kube_retention_webhook::Context;
use kube_retention_webhook::access::Request as Question;
use kube_retention_webhook::access::{ControllerAccess, Missing, Plural, Subject};
use kube_retention_webhook::parents::{Lookup, Parents};
use kube_retention_webhook::router::{DEFAULT_MAX_BODY_BYTES, router as webhook_router};
use kube_retention_webhook::writers::{Allowed, WriterAccess};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Parents from `tests/testsuite/fixtures`, looked up by kind (`Build.shipwright.io`) and name; `reads`
/// counts the lookups.
pub struct FakeParents {
    parents: HashMap<(String, String), Value>,
    pub reads: AtomicUsize,
}

impl FakeParents {
    pub fn with_fixtures() -> Self {
        let mut parents = HashMap::new();
        parents.insert(
            ("Build.shipwright.io".to_owned(), "hello".to_owned()),
            fixture("build-hello.json"),
        );
        Self {
            parents,
            reads: AtomicUsize::new(0),
        }
    }
}

impl Parents for FakeParents {
    fn get<'a>(&'a self, kind: &'a Resource, _namespace: &'a str, name: &'a str) -> Lookup<'a> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let found = self
            .parents
            .get(&(kind.to_string(), name.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }
}

pub fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testsuite/fixtures")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

pub struct TestRouter(Router);

pub fn router() -> TestRouter {
    let context = Arc::new(Context::new(Arc::new(FakeParents::with_fixtures())));
    TestRouter(webhook_router(context, DEFAULT_MAX_BODY_BYTES))
}

impl TestRouter {
    pub fn over(router: Router) -> Self {
        Self(router)
    }

    pub async fn oneshot_raw(self, request: Request<Body>) -> (StatusCode, Bytes) {
        let response = self.0.oneshot(request).await.unwrap();
        let status = response.status();
        (
            status,
            response.into_body().collect().await.unwrap().to_bytes(),
        )
    }
}

impl Clone for TestRouter {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// Posts `review` to `path` on a fresh router; returns the status and the JSON body.
pub async fn send(path: &str, review: &Value) -> (StatusCode, Value) {
    let context = Context::new(Arc::new(FakeParents::with_fixtures()));
    send_to(context, path, review).await
}

/// Posts `review` to `path` on a router over `context`.
pub async fn send_to(context: Context, path: &str, review: &Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let router = TestRouter(webhook_router(Arc::new(context), DEFAULT_MAX_BODY_BYTES));
    let (status, body) = router.oneshot_raw(request).await;
    (status, serde_json::from_slice(&body).unwrap())
}

/// The controller may do everything but patch and delete Secrets; there are no Gadgets.
pub struct NoSecrets;

impl ControllerAccess for NoSecrets {
    fn missing<'a>(&'a self, group: &'a str, resource: &'a str) -> Missing<'a> {
        let missing = if (group, resource) == ("", "secrets") {
            vec!["patch", "delete"]
        } else {
            Vec::new()
        };
        Box::pin(async move { Ok(missing) })
    }

    fn served<'a>(&'a self, _api_version: &'a str, kind: &'a str) -> Plural<'a> {
        let plural = (kind != "Gadget").then(|| format!("{}s", kind.to_ascii_lowercase()));
        Box::pin(async move { Ok(plural) })
    }
}

/// An AdmissionReview for `object` of the given group, version and kind.
pub fn review(
    group: &str,
    version: &str,
    kind: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
            "name": object["metadata"]["name"],
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    })
}

/// `object` with the JSON patch of an admission `response` applied (unchanged without one).
pub fn apply_patch(object: &Value, response: &Value) -> Value {
    let mut patched = object.clone();
    if let Some(patch) = response.get("patch") {
        // Go decodes a []byte from base64 text or from an array of bytes; kube sends the latter.
        let bytes: Vec<u8> = match patch {
            Value::String(text) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap()
            }
            other => serde_json::from_value(other.clone()).unwrap(),
        };
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
    }
    patched
}

/// The controller's user as the webhook is told it.
pub const CONTROLLER: &str = "system:serviceaccount:kube-retention:kube-retention-controller";

/// RBAC as a table of (user, verb, resource, namespace) allowed; every question is recorded.
/// Questions about the user `unreachable` fail, as when the API server cannot answer.
#[derive(Default)]
pub struct Rbac {
    pub allowed: Vec<(
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
    )>,
    pub asked: Mutex<Vec<(String, Question)>>,
}

impl WriterAccess for Rbac {
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Question) -> Allowed<'a> {
        self.asked
            .lock()
            .unwrap()
            .push((writer.user.clone(), request.clone()));
        let allowed = self
            .allowed
            .iter()
            .any(|&(user, verb, resource, namespace)| {
                (user, verb, resource, namespace)
                    == (
                        writer.user.as_str(),
                        request.verb,
                        request.resource.as_str(),
                        request.namespace.as_deref(),
                    )
            });
        let unreachable = writer.user == "unreachable";
        Box::pin(async move {
            if unreachable {
                return Err(kube::Error::Service("connection refused".into()));
            }
            Ok(allowed)
        })
    }
}

pub fn context(rbac: Arc<Rbac>) -> Context {
    context_with(rbac, Arc::new(FakeParents::with_fixtures()))
}

/// [`context`] over `parents`, to count their reads.
pub fn context_with(rbac: Arc<Rbac>, parents: Arc<FakeParents>) -> Context {
    Context::new(parents)
        .with_access(Arc::new(NoSecrets))
        .with_writers(rbac, CONTROLLER)
}

pub fn as_user(mut review: Value, user: &str) -> Value {
    review["request"]["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
    review
}

/// A review by `bob` of a `retention.dev` object (a policy, a Cleaner).
pub fn ours(kind: &str, operation: &str, object: &Value, old: Option<&Value>) -> Value {
    as_user(
        review("retention.dev", "v1alpha1", kind, operation, object, old),
        "bob",
    )
}

/// The fields an AdmissionReview response's denial names, in order.
pub fn cause_fields(body: &Value) -> Vec<String> {
    body["response"]["status"]["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|cause| cause["field"].as_str().unwrap_or_default().to_owned())
        .collect()
}
