//! What one admission of a policy or a Cleaner costs the API server, against a mocked one
//! (`kube-retention-apimock`): one discovery request per group version named (remembered
//! after), one SubjectAccessReview per distinct question (two targets of one kind share theirs),
//! up to `writers::CONCURRENT_QUESTIONS` of them at once, and nothing at all for the same
//! admission again while the answers are remembered. The exact requests are asserted; those
//! made at once are compared as sets, their order being the scheduler's.

use crate::api_server;
use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use api_server::{ApiServer, CONTROLLER, REVIEWS, start};
use axum::body::Body;
use axum::http::Request;
use kube_retention_apimock::Received;
use kube_retention_common::cleaner::helm::UNINSTALLABLE_KINDS;
use kube_retention_webhook::Context;
use kube_retention_webhook::access::CACHE_FOR;
use kube_retention_webhook::compilations::CompileLimits;
use kube_retention_webhook::limits::Limits;
use kube_retention_webhook::router::{DEFAULT_MAX_BODY_BYTES, router};
use kube_retention_webhook::writers::CONCURRENT_QUESTIONS;
use serde_json::{Value, json};
use support::{FakeParents, TestRouter, ours};

/// A context asking the mocked API server, with a deadline no test reaches.
fn context() -> (ApiServer, Arc<Context>) {
    let (server, reviews) = start(CACHE_FOR);
    let context = Context::new(Arc::new(FakeParents::with_fixtures()))
        .with_access(reviews.clone())
        .with_writers(reviews, CONTROLLER)
        .with_limits(
            Limits::new(Duration::from_secs(24 * 3600), 128),
            CompileLimits::default(),
        );
    (server, Arc::new(context))
}

/// Validates `review` in a task of its own: the answer's JSON.
fn admit(context: &Arc<Context>, review: &Value) -> tokio::task::JoinHandle<Value> {
    let request = Request::post("/validate")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    tokio::spawn(async move {
        let (_, body) = router.oneshot_raw(request).await;
        serde_json::from_slice(&body).unwrap()
    })
}

/// Answers a discovery request for `resources` (plural, kind) of the group version it asks for;
/// returns its path.
fn discovery(seen: Received, resources: &[(&str, &str)]) -> String {
    assert_eq!(seen.method, "GET", "{}", seen.line());
    let path = seen.path.clone();
    let group_version = path
        .trim_start_matches("/apis/")
        .trim_start_matches("/api/");
    let resources: Vec<Value> = resources
        .iter()
        .map(|(name, kind)| {
            json!({"name": name, "singularName": "", "namespaced": true, "kind": kind,
                   "verbs": ["list", "delete"]})
        })
        .collect();
    seen.reply(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": group_version, "resources": resources}),
    );
    path
}

/// Answers a SubjectAccessReview with `allowed`; returns who asked what:
/// "user verb resource [name]".
fn review(seen: Received, allowed: bool) -> String {
    assert_eq!(seen.line(), format!("POST {REVIEWS}"));
    let spec = seen.body["spec"].clone();
    let attributes = &spec["resourceAttributes"];
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let asked = format!(
        "{} {} {} {}",
        text(&spec["user"]),
        text(&attributes["verb"]),
        text(&attributes["resource"]),
        text(&attributes["name"])
    );
    seen.reply(
        200,
        &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "metadata": {}, "spec": spec, "status": {"allowed": allowed}}),
    );
    asked.trim_end().to_owned()
}

/// The next `count` requests, each a review answered `allowed`: who asked what, as a set.
async fn reviews(server: &mut ApiServer, count: usize) -> BTreeSet<String> {
    let mut asked = BTreeSet::new();
    for _ in 0..count {
        asked.insert(review(server.next().await.expect("a review"), true));
    }
    asked
}

#[tokio::test(start_paused = true)]
async fn a_cleaner_costs_one_lookup_per_group_version_and_one_review_per_distinct_question() {
    let (mut server, context) = context();
    let spec = json!({"ttl": "1h", "helm": {"release": "preview", "delete": true}, "targets": [
        {"name": "a", "delete": true, "reference": {"version": "v1", "kind": "ConfigMap", "name": "a"}},
        {"name": "b", "delete": true, "reference": {"version": "v1", "kind": "ConfigMap", "name": "b"}},
        {"name": "pods", "includeWhenEvaluating": true,
         "reference": {"version": "v1", "kind": "Pod", "matchLabels": {"app": "preview"}}}],
        "conditions": ["pods.items.size() == 0"]});
    let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
                        "metadata": {"name": "preview", "namespace": "team-a"}, "spec": spec});
    let answer = admit(&context, &ours("Cleaner", "CREATE", &object, None));
    let served = [("configmaps", "ConfigMap"), ("pods", "Pod")];
    assert_eq!(discovery(server.next().await.unwrap(), &served), "/api/v1");
    // Deleting a and b both ask first about every ConfigMap: one question, one review, shared
    // with the Helm release's question about ConfigMaps; the release asks about every kind a
    // Cleaner uninstalls, their plurals known without discovery.
    let mut expected =
        BTreeSet::from(["bob list configmaps".to_owned(), "bob list pods".to_owned()]);
    expected.extend(
        UNINSTALLABLE_KINDS
            .iter()
            .map(|known| format!("bob delete {}", known.plural)),
    );
    assert_eq!(expected.len(), 15);
    assert_eq!(reviews(&mut server, 15).await, expected);
    assert!(server.quiet().await);
    let answer = answer.await.unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test(start_paused = true)]
async fn a_policy_asks_once_and_the_same_admission_again_asks_nothing() {
    let (mut server, context) = context();
    let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"},
                               {"apiVersion": "batch/v1", "kind": "CronJob"},
                               {"apiVersion": "v1", "kind": "ConfigMap"}],
                 "ttl": "1h", "match": "object.metadata.name.startsWith('ci-')"}});
    let request = ours("RetentionPolicy", "CREATE", &object, None);
    let answer = admit(&context, &request);
    let batch = [("jobs", "Job"), ("cronjobs", "CronJob")];
    let mut looked_up = BTreeSet::new();
    for _ in 0..2 {
        let seen = server.next().await.unwrap();
        let resources: &[(&str, &str)] = if seen.path == "/api/v1" {
            &[("configmaps", "ConfigMap")]
        } else {
            &batch
        };
        looked_up.insert(discovery(seen, resources));
    }
    assert_eq!(
        looked_up,
        BTreeSet::from(["/api/v1".to_owned(), "/apis/batch/v1".to_owned()])
    );
    let mut writer = BTreeSet::new();
    for resource in ["jobs", "cronjobs", "configmaps"] {
        for verb in ["delete", "list"] {
            writer.insert(format!("bob {verb} {resource}"));
        }
    }
    assert_eq!(reviews(&mut server, 6).await, writer);
    // The policy's warnings: whether the controller may list, watch, patch, delete each kind.
    let mut controller = BTreeSet::new();
    for resource in ["jobs", "cronjobs", "configmaps"] {
        for verb in ["list", "watch", "patch", "delete"] {
            controller.insert(format!("{CONTROLLER} {verb} {resource}"));
        }
    }
    assert_eq!(reviews(&mut server, 12).await, controller);
    assert!(server.quiet().await);
    let first = answer.await.unwrap();
    assert_eq!(first["response"]["allowed"], true, "{first}");
    assert!(first["response"].get("warnings").is_none(), "{first}");

    let again = admit(&context, &request);
    assert!(server.quiet().await, "every answer is remembered");
    assert_eq!(again.await.unwrap()["response"], first["response"]);
}

#[tokio::test(start_paused = true)]
async fn an_admission_has_at_most_its_bound_of_questions_in_flight() {
    let (mut server, context) = context();
    let kinds = ["Job", "CronJob", "Gadget", "Widget", "Sprocket"];
    let resources: Vec<Value> = kinds
        .iter()
        .map(|kind| json!({"apiVersion": "example.com/v1", "kind": kind}))
        .collect();
    let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resources": resources, "ttl": "1h"}});
    let answer = admit(&context, &ours("RetentionPolicy", "CREATE", &object, None));
    let served: Vec<(String, String)> = kinds
        .iter()
        .map(|kind| (format!("{}s", kind.to_lowercase()), (*kind).to_owned()))
        .collect();
    let served: Vec<(&str, &str)> = served
        .iter()
        .map(|(p, k)| (p.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        discovery(server.next().await.unwrap(), &served),
        "/apis/example.com/v1"
    );
    // Ten questions (delete and list on five kinds): the bound's worth arrive, then no more
    // until one is answered.
    let mut waiting = Vec::new();
    for _ in 0..CONCURRENT_QUESTIONS {
        waiting.push(server.next().await.expect("a review"));
    }
    assert!(
        server
            .0
            .next_within(Duration::from_secs(60))
            .await
            .is_none(),
        "no more than {CONCURRENT_QUESTIONS} at once"
    );
    let mut asked = BTreeSet::new();
    for seen in waiting {
        asked.insert(review(seen, true));
    }
    asked.extend(reviews(&mut server, 10 - CONCURRENT_QUESTIONS).await);
    assert_eq!(asked.len(), 10);
    // The controller's permissions, for the warnings: four verbs on each of the five kinds.
    assert_eq!(reviews(&mut server, 20).await.len(), 20);
    assert!(server.quiet().await);
    let answer = answer.await.unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}
