//! The writer check through the router, for settings on objects: a retention setting is
//! admitted only from a writer who may delete what it governs, refusals name the field, the value
//! and the permission lacking, and what tightens nothing asks nothing.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{
    CONTROLLER, FakeParents, Rbac, as_user, cause_fields, context, context_with, fixture, review,
    send_to,
};

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
    let request = run_from_build();
    let parents = Arc::new(FakeParents::with_fixtures());
    let rbac = Arc::new(Rbac::default());
    let (_, body) = send_to(context_with(rbac, parents.clone()), "/validate", &request).await;
    assert_eq!(
        cause_fields(&body),
        ["spec.retention.ttlAfterFailed"],
        "{body}"
    );
    assert_eq!(parents.reads.load(Ordering::Relaxed), 1);

    // A writer who may delete the run costs no read of its Build.
    let parents = Arc::new(FakeParents::with_fixtures());
    let allowed = Arc::new(Rbac {
        allowed: vec![("bob", "delete", "buildruns", Some("team-a"))],
        ..Rbac::default()
    });
    let (_, body) = send_to(
        context_with(allowed, parents.clone()),
        "/validate",
        &request,
    )
    .await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(parents.reads.load(Ordering::Relaxed), 0);
}

/// A BuildRun of the Build `hello` by `bob`, after mutation: ttlAfterSucceeded copied from the
/// Build, ttlAfterFailed the run's own.
fn run_from_build() -> Value {
    let mut run = fixture("mutate-buildrun-of-build.json")["request"]["object"].clone();
    run["spec"]["retention"] = json!({"ttlAfterSucceeded": "1.5h", "ttlAfterFailed": "5m"});
    as_user(
        review("shipwright.io", "v1beta1", "BuildRun", "CREATE", &run, None),
        "bob",
    )
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

/// A review's `userInfo` is what its sender says. Asking about a writer holds copies of it (the
/// reviews sent and their answers), so asking is charged to the memory admissions share first:
/// a writer of a 400 KiB `userInfo` is refused, saying why and asking nothing; one of ordinary
/// size is asked about as ever, and gives its charge back.
#[tokio::test]
async fn asking_about_a_crowded_writer_is_charged_first_and_refused_without_room() {
    let request = annotated(None, &config_map(json!({"retention.dev/ttl": "1s"})), "bob");
    let mut crowded = request.clone();
    let groups: Vec<String> = (0..4000)
        .map(|group| format!("group-{group:06}-{}", "x".repeat(88)))
        .collect();
    crowded["request"]["userInfo"]["groups"] = json!(groups);
    let rbac = Arc::new(Rbac {
        allowed: vec![("bob", "delete", "configmaps", Some("team-a"))],
        ..Rbac::default()
    });
    let fresh = || context(rbac.clone()).with_memory(8 * 1024 * 1024);
    let first = fresh();
    let memory = first.memory.clone();
    let (status, body) = send_to(first, "/validate", &crowded).await;
    assert_eq!(status, StatusCode::OK);
    let response = &body["response"];
    assert_eq!(response["allowed"], false, "{body:.400}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "kube-retention could not check your permissions: asking about a userInfo of"
        ) && message.contains("the webhook's memory for admissions"),
        "{message}"
    );
    assert!(rbac.asked.lock().unwrap().is_empty(), "asked nothing");
    assert_eq!(memory.used(), 0, "its charges given back");
    let second = fresh();
    let memory = second.memory.clone();
    let (_, body) = send_to(second, "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(rbac.asked.lock().unwrap().len(), 1);
    assert_eq!(memory.used(), 0, "every charge given back");
}
