//! The writer check through the router: a retention setting is admitted only from a writer who
//! may delete what it governs, refusals name the field, the value and the permission lacking,
//! and what tightens nothing asks nothing.

#![allow(clippy::unwrap_used)] // test code

mod support;

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use kube_retention_webhook::Context;
use kube_retention_webhook::access::{Request, Subject};
use kube_retention_webhook::writers::{Allowed, WriterAccess};
use serde_json::{Value, json};
use support::{FakeParents, NoSecrets, fixture, review, send_to};

const CONTROLLER: &str = "system:serviceaccount:kube-retention:kube-retention-controller";

/// RBAC as a table of (user, verb, resource, namespace) allowed; every question is recorded.
/// Questions about the user `unreachable` fail, as when the API server cannot answer.
#[derive(Default)]
struct Rbac {
    allowed: Vec<(
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
    )>,
    asked: Mutex<Vec<(String, Request)>>,
}

impl WriterAccess for Rbac {
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Request) -> Allowed<'a> {
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

fn context(rbac: Arc<Rbac>) -> Context {
    Context::new(Arc::new(FakeParents::with_fixtures()))
        .with_access(Arc::new(NoSecrets))
        .with_writers(rbac, CONTROLLER)
}

fn as_user(mut review: Value, user: &str) -> Value {
    review["request"]["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
    review
}

fn config_map(annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "settings", "namespace": "team-a", "annotations": annotations}})
}

fn annotated(old: Option<&Value>, new: &Value, user: &str) -> Value {
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    as_user(review("", "v1", "ConfigMap", operation, new, old), user)
}

#[tokio::test]
async fn a_ttl_needs_delete_on_the_object_and_the_refusal_says_what_is_missing() {
    let rbac = Arc::new(Rbac::default());
    let request = annotated(None, &config_map(json!({"retention.dev/ttl": "1s"})), "bob");
    let (status, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(status, StatusCode::OK);
    let response = &body["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    assert_eq!(
        response["status"]["message"],
        "metadata.annotations[retention.dev/ttl]: \"1s\" you may not delete configmaps in \
         namespace team-a, so you may not set their retention"
    );
    assert_eq!(
        response["status"]["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    let asked = rbac.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1.name.as_deref(), Some("settings"));

    let granted = Arc::new(Rbac {
        allowed: vec![("bob", "delete", "configmaps", Some("team-a"))],
        ..Rbac::default()
    });
    let (_, body) = send_to(context(granted), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

#[tokio::test]
async fn lengthening_removing_or_keeping_asks_nothing() {
    let short = config_map(json!({"retention.dev/ttl": "1h"}));
    let long = config_map(json!({"retention.dev/ttl": "2h"}));
    let kept = config_map(json!({"retention.dev/ttl": "1h", "retention.dev/keep": "true"}));
    for (old, new) in [
        (&short, &long),
        (&short, &config_map(json!({}))),
        (&short, &kept),
    ] {
        let rbac = Arc::new(Rbac::default());
        let (_, body) = send_to(
            context(rbac.clone()),
            "/validate",
            &annotated(Some(old), new, "bob"),
        )
        .await;
        assert_eq!(body["response"]["allowed"], true, "{new}: {body}");
        assert!(rbac.asked.lock().unwrap().is_empty(), "{new}");
    }
}

#[tokio::test]
async fn kube_retentions_own_writes_are_not_checked() {
    let rbac = Arc::new(Rbac::default());
    let stamped = config_map(json!({"retention.dev/ttl": "1h",
                                    "retention.dev/expires-at": "2026-12-01T00:00:00Z",
                                    "retention.dev/stamped": "2026-12-01T00:00:00Z"}));
    let (_, body) = send_to(
        context(rbac.clone()),
        "/validate",
        &annotated(None, &stamped, CONTROLLER),
    )
    .await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(rbac.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_run_answers_for_its_own_ttls_not_those_it_took_from_its_build() {
    let rbac = Arc::new(Rbac::default());
    // After mutation: ttlAfterSucceeded copied from the Build `hello`, ttlAfterFailed the run's own.
    let mut run = fixture("mutate-buildrun-of-build.json")["request"]["object"].clone();
    run["spec"]["retention"] = json!({"ttlAfterSucceeded": "1.5h", "ttlAfterFailed": "5m"});
    let request = as_user(
        review("shipwright.io", "v1beta1", "BuildRun", "CREATE", &run, None),
        "bob",
    );
    let (_, body) = send_to(context(rbac), "/validate", &request).await;
    let causes = body["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .clone();
    let fields: Vec<&str> = causes
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["spec.retention.ttlAfterFailed"], "{body}");
}

#[tokio::test]
async fn a_builds_run_settings_need_delete_on_its_runs() {
    let rbac = Arc::new(Rbac::default());
    let build = fixture("build-hello.json");
    let request = as_user(
        review("shipwright.io", "v1beta1", "Build", "CREATE", &build, None),
        "bob",
    );
    let (_, body) = send_to(context(rbac), "/validate", &request).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("3 retention settings are not yours to make:"),
        "{message}"
    );
    assert!(
        message.contains("spec.retention.atBuildDeletion: true you may not delete buildruns.shipwright.io \
                          in namespace team-a, so you may not set the retention of the runs it governs"),
        "{message}"
    );
}

fn policy(kind: &str, namespace: Option<&str>) -> Value {
    let mut policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": kind,
                            "metadata": {"name": "p"},
                            "spec": {"resources": [{"apiVersion": "v1", "kind": "Secret"}], "ttl": "1h"}});
    if let Some(namespace) = namespace {
        policy["metadata"]["namespace"] = json!(namespace);
    }
    policy
}

#[tokio::test]
async fn a_policy_needs_delete_and_list_on_each_kind_where_it_applies() {
    let rbac = Arc::new(Rbac::default());
    let namespaced = policy("RetentionPolicy", Some("team-a"));
    let request = as_user(
        review(
            "retention.dev",
            "v1alpha1",
            "RetentionPolicy",
            "CREATE",
            &namespaced,
            None,
        ),
        "bob",
    );
    let (_, body) = send_to(context(rbac), "/validate", &request).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    for lacking in [
        "you may not delete secrets in namespace team-a",
        "you may not list secrets in namespace team-a",
    ] {
        assert!(message.contains(lacking), "{message}");
    }
    let namespaced_only = Arc::new(Rbac {
        allowed: vec![
            ("bob", "delete", "secrets", Some("team-a")),
            ("bob", "list", "secrets", Some("team-a")),
        ],
        ..Rbac::default()
    });
    let (_, body) = send_to(context(namespaced_only.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    let cluster = policy("ClusterRetentionPolicy", None);
    let request = as_user(
        review(
            "retention.dev",
            "v1alpha1",
            "ClusterRetentionPolicy",
            "CREATE",
            &cluster,
            None,
        ),
        "bob",
    );
    let (_, body) = send_to(context(namespaced_only), "/validate", &request).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("you may not delete secrets cluster-wide"),
        "{message}"
    );

    // A change outside the spec (a label) needs nothing.
    let rbac = Arc::new(Rbac::default());
    let mut labelled = namespaced.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    let request = as_user(
        review(
            "retention.dev",
            "v1alpha1",
            "RetentionPolicy",
            "UPDATE",
            &labelled,
            Some(&namespaced),
        ),
        "bob",
    );
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(rbac.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_check_that_cannot_be_made_refuses_the_write_with_the_reason() {
    let rbac = Arc::new(Rbac::default());
    let request = annotated(
        None,
        &config_map(json!({"retention.dev/ttl": "1h"})),
        "unreachable",
    );
    let (status, body) = send_to(context(rbac), "/validate", &request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], false);
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("kube-retention could not check that you may delete configmaps:"),
        "{message}"
    );
}

#[tokio::test]
async fn invalid_settings_are_denied_before_anyone_is_asked() {
    let rbac = Arc::new(Rbac::default());
    let request = annotated(
        None,
        &config_map(json!({"retention.dev/ttl": "1 day"})),
        "bob",
    );
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["status"]["code"], 422);
    assert!(rbac.asked.lock().unwrap().is_empty());
}

fn cleaner(spec: Value) -> Value {
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
           "metadata": {"name": "preview-42", "namespace": "team-a"}, "spec": spec})
}

#[tokio::test]
async fn a_cleaner_needs_delete_on_what_it_deletes_and_list_on_what_it_reads() {
    let spec = json!({"ttl": "1h", "helm": {"release": "preview-42", "delete": true},
        "targets": [{"name": "settings", "delete": true,
                     "reference": {"version": "v1", "kind": "ConfigMap", "name": "preview-42"}},
                    {"name": "pods", "includeWhenEvaluating": true,
                     "reference": {"version": "v1", "kind": "Pod", "matchLabels": {"app": "p42"}}}],
        "conditions": ["pods.items.size() == 0"]});
    let object = cleaner(spec);
    let request = as_user(
        review(
            "retention.dev",
            "v1alpha1",
            "Cleaner",
            "CREATE",
            &object,
            None,
        ),
        "bob",
    );
    let (_, body) = send_to(context(Arc::new(Rbac::default())), "/validate", &request).await;
    let causes = body["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .clone();
    let found: Vec<(&str, &str)> = causes
        .iter()
        .map(|cause| {
            (
                cause["field"].as_str().unwrap(),
                cause["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "spec.targets[0]",
                "\"settings\" you may not delete configmaps in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.targets[0]",
                "\"settings\" you may not list configmaps in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.targets[1]",
                "\"pods\" you may not list pods in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.helm",
                "\"preview-42\" you may not delete secrets in namespace team-a, so you may not \
                 have a Cleaner uninstall a Helm release (Helm keeps it in Secrets)"
            ),
        ]
    );
    let allowed = Arc::new(Rbac {
        allowed: vec![
            ("bob", "delete", "configmaps", Some("team-a")),
            ("bob", "list", "configmaps", Some("team-a")),
            ("bob", "list", "pods", Some("team-a")),
            ("bob", "delete", "secrets", Some("team-a")),
        ],
        ..Rbac::default()
    });
    let (_, body) = send_to(context(allowed), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

#[tokio::test]
async fn an_invalid_cleaner_is_denied_naming_every_field_before_anyone_is_asked() {
    let rbac = Arc::new(Rbac::default());
    let object = cleaner(json!({"ttl": "1d", "targets": [
        {"name": "a-b", "reference": {"version": "v1", "kind": "Pod"}}],
        "conditions": ["a.items.size() > 0"]}));
    let request = as_user(
        review(
            "retention.dev",
            "v1alpha1",
            "Cleaner",
            "CREATE",
            &object,
            None,
        ),
        "bob",
    );
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["status"]["code"], 422);
    let causes = body["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .clone();
    let fields: Vec<&str> = causes
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["spec.ttl", "spec.targets[0].name", "spec.conditions[0]"]
    );
    assert!(rbac.asked.lock().unwrap().is_empty());
}
