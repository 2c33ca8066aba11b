//! CEL compilation at admission, through the router: policies' and Cleaners' expressions are
//! compiled off the async workers, at most `--max-compilations` at once however many large
//! expressions arrive together (a property over generated ones), once per admission; a writer
//! who may not make a policy has nothing compiled; lists past the CRDs' bounds are refused
//! before anything is compiled or asked; a namespace past its share of the compile time is
//! refused uncompiled, saying when to try again, while other namespaces compile. Counts and
//! outcomes, never times.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kube_retention_webhook::Context;
use kube_retention_webhook::compilations::CompileLimits;
use kube_retention_webhook::limits::Limits;
use kube_retention_webhook::router::{DEFAULT_MAX_BODY_BYTES, router};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{Rbac, TestRouter, cause_fields, context, ours};

/// Posts `review` to `/validate` on a router over `context`: the status and the JSON body.
async fn validate(context: &Arc<Context>, review: &Value) -> (StatusCode, Value) {
    let request = Request::post("/validate")
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let router = TestRouter::over(router(context.clone(), DEFAULT_MAX_BODY_BYTES));
    let (status, body) = router.oneshot_raw(request).await;
    (status, serde_json::from_slice(&body).unwrap())
}

fn policy(spec: Value) -> Value {
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
           "metadata": {"name": "p", "namespace": "team-a"}, "spec": spec})
}

fn cleaner(targets: usize, conditions: Vec<String>) -> Value {
    let targets: Vec<Value> = (0..targets)
        .map(|index| {
            json!({"name": format!("t{index}"), "includeWhenEvaluating": true,
                   "reference": {"version": "v1", "kind": "ConfigMap", "name": format!("c{index}")}})
        })
        .collect();
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
           "metadata": {"name": "preview", "namespace": "team-a"},
           "spec": {"ttl": "1h", "targets": targets, "conditions": conditions}})
}

/// May delete and list Secrets in team-a: what the policies here name.
fn secrets_editor() -> Arc<Rbac> {
    Arc::new(Rbac {
        allowed: vec![
            ("bob", "delete", "secrets", Some("team-a")),
            ("bob", "list", "secrets", Some("team-a")),
        ],
        ..Rbac::default()
    })
}

fn secrets_policy(matching: &str) -> Value {
    policy(
        json!({"resources": [{"apiVersion": "v1", "kind": "Secret"}], "ttl": "1h",
                  "match": matching}),
    )
}

#[tokio::test]
async fn a_writer_who_may_not_make_a_policy_has_nothing_compiled() {
    let context = Arc::new(context(Arc::new(Rbac::default())));
    let object = secrets_policy("object.metadata.name.startsWith('ci-')");
    let (_, body) = validate(&context, &ours("RetentionPolicy", "CREATE", &object, None)).await;
    assert_eq!(body["response"]["status"]["code"], 403, "{body}");
    assert_eq!(
        cause_fields(&body),
        ["spec.resources[0]", "spec.resources[0]"]
    );
    assert_eq!(context.compilations.started(), 0);
}

#[tokio::test]
async fn an_expression_that_does_not_compile_is_denied_once_its_writer_may_make_it() {
    let rbac = secrets_editor();
    let context = Arc::new(context(rbac.clone()));
    let object = secrets_policy("object.metadata.name.frobnicate()");
    let (_, body) = validate(&context, &ours("RetentionPolicy", "CREATE", &object, None)).await;
    assert_eq!(body["response"]["status"]["code"], 422, "{body}");
    assert_eq!(cause_fields(&body), ["spec.match"]);
    assert_eq!(
        rbac.asked.lock().unwrap().len(),
        2,
        "delete and list, asked first"
    );
    assert_eq!(context.compilations.started(), 1);

    let valid = secrets_policy("object.metadata.name.startsWith('ci-')");
    let (_, body) = validate(&context, &ours("RetentionPolicy", "CREATE", &valid, None)).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(context.compilations.started(), 2);
}

#[tokio::test]
async fn lists_past_their_bounds_are_refused_before_anything_is_compiled_or_asked() {
    let rbac = Arc::new(Rbac::default());
    let context = Arc::new(context(rbac.clone()));
    let conditions = vec!["t0.items.size() == 0".to_owned(); 17];
    let object = cleaner(17, conditions);
    let (_, body) = validate(&context, &ours("Cleaner", "CREATE", &object, None)).await;
    assert_eq!(body["response"]["status"]["code"], 422, "{body}");
    assert_eq!(cause_fields(&body), ["spec.targets", "spec.conditions"]);
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.targets: 17 targets are above the limit of 16 (the CRD's maxItems)"),
        "{message}"
    );
    assert_eq!(context.compilations.started(), 0);
    assert!(rbac.asked.lock().unwrap().is_empty());
}

/// Two at once, and each namespace's share so large no test here reaches it.
const UNLIMITED_SHARE: CompileLimits = CompileLimits {
    at_once: 2,
    namespace_share: 1.0,
    namespace_burst: Duration::from_secs(3600),
};

/// A context whose namespaces are in debt after any compilation, for hours: a millionth of a
/// core and no burst.
fn stingy(at_once: usize) -> Arc<Context> {
    Arc::new(
        Context::new(Arc::new(support::FakeParents::with_fixtures())).with_limits(
            Limits::new(Duration::from_secs(3600), 128),
            CompileLimits {
                at_once,
                namespace_share: 1e-6,
                namespace_burst: Duration::ZERO,
            },
        ),
    )
}

fn in_namespace(mut object: Value, namespace: &str) -> Value {
    object["metadata"]["namespace"] = json!(namespace);
    object
}

#[tokio::test]
async fn a_namespace_past_its_share_is_refused_uncompiled_saying_when_while_others_compile() {
    let context = stingy(2);
    let conditions = vec!["t0.items.size() == 0".to_owned()];
    let review = |namespace: &str| {
        let mut review = ours(
            "Cleaner",
            "CREATE",
            &in_namespace(cleaner(1, conditions.clone()), namespace),
            None,
        );
        review["request"]["namespace"] = json!(namespace);
        review
    };
    let (_, body) = validate(&context, &review("team-a")).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(context.compilations.started(), 1);

    let (status, body) = validate(&context, &review("team-a")).await;
    assert_eq!(status, StatusCode::OK);
    let refused = &body["response"]["status"];
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert_eq!(refused["code"], 429, "{body}");
    assert_eq!(refused["reason"], "TooManyRequests", "{body}");
    assert!(
        refused["details"]["retryAfterSeconds"].as_u64().unwrap() >= 1,
        "{body}"
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("namespace team-a has used its share of kube-retention's time for compiling CEL (0% of a core")
            && message.contains("--namespace-compile-share")
            && message.contains("try again in "),
        "{message}"
    );
    assert_eq!(context.compilations.started(), 1, "refused uncompiled");
    assert_eq!(context.compilations.throttled(), 1);

    let (_, body) = validate(&context, &review("team-b")).await;
    assert_eq!(
        body["response"]["allowed"], true,
        "team-b pays nothing for team-a: {body}"
    );
    assert_eq!(context.compilations.started(), 2);
    let metrics = context.metrics.encode();
    assert!(
        metrics.contains(r#"outcome="throttled""#),
        "the refusal is counted: {metrics}"
    );
}

#[tokio::test]
async fn cluster_scoped_policies_share_one_account_and_are_told_so() {
    let context = stingy(1);
    let review = |name: &str| {
        let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "ClusterRetentionPolicy",
                            "metadata": {"name": name},
                            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                     "ttl": "1h", "match": "object.metadata.name != ''"}});
        let mut review = ours("ClusterRetentionPolicy", "CREATE", &object, None);
        review["request"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        review
    };
    let (_, body) = validate(&context, &review("first")).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    let (_, body) = validate(&context, &review("second")).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("cluster-scoped policies have used their share"),
        "{message}"
    );
}

/// Cleaners of sixteen targets with each of `requests`' conditions, admitted all at once on two
/// worker threads: each answer's status and body.
fn sent_together(context: &Arc<Context>, requests: &[Vec<String>]) -> Vec<(StatusCode, Value)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let admissions = requests.iter().map(|conditions| {
            let review = ours("Cleaner", "CREATE", &cleaner(16, conditions.clone()), None);
            async move { validate(context, &review).await }
        });
        futures::future::join_all(admissions).await
    })
}

/// Expressions near the bounds on one: `&&` chains of size comparisons over the targets, up to
/// 4,096 bytes and 1,024 tokens, nested brackets up to the depth bound, or text that is not
/// CEL at all.
fn expression() -> impl Strategy<Value = String> {
    let chain = (1usize..100, 0usize..16).prop_map(|(terms, target)| {
        let term = format!("t{target}.items.size() > {terms}");
        vec![term; terms].join(" && ")
    });
    let nested = (1usize..33).prop_map(|depth| {
        format!(
            "{}t0.items.size() == 0{}",
            "(".repeat(depth),
            ")".repeat(depth)
        )
    });
    let junk = "[ -~]{0,4096}";
    prop_oneof![chain, nested, junk]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// However many large expressions arrive at once, at most `--max-compilations` admissions
    /// compile at a time, each once, and every admission is answered with a review.
    #[test]
    fn concurrent_admissions_of_large_expressions_compile_within_the_bound(
        requests in prop::collection::vec(prop::collection::vec(expression(), 1..=16), 1..=6),
    ) {
        let context = Arc::new(
            Context::new(Arc::new(support::FakeParents::with_fixtures()))
                .with_limits(Limits::new(Duration::from_secs(3600), 128), UNLIMITED_SHARE),
        );
        let answers = sent_together(&context, &requests);
        for (status, body) in &answers {
            prop_assert_eq!(*status, StatusCode::OK);
            prop_assert!(body["response"]["allowed"].is_boolean(), "{}", body);
            prop_assert_ne!(&body["response"]["status"]["code"], &json!(504), "{}", body);
        }
        prop_assert!(context.compilations.peak() <= 2, "peak {}", context.compilations.peak());
        prop_assert_eq!(context.compilations.started(), requests.len());
        prop_assert_eq!(context.compilations.running(), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// However many admissions one namespace sends at once, they cannot all spend one credit:
    /// at most the permits' worth compile before the first is charged, and the rest are
    /// refused uncompiled, each with an answer.
    #[test]
    fn admissions_sent_together_compile_at_most_the_permits_worth_past_the_share(
        requests in prop::collection::vec(prop::collection::vec(expression(), 1..=16), 2..=12),
        at_once in 1usize..=3,
    ) {
        let context = stingy(at_once);
        let answers = sent_together(&context, &requests);
        let throttled = answers
            .iter()
            .filter(|(_, body)| body["response"]["status"]["code"] == 429)
            .count();
        for (status, body) in &answers {
            prop_assert_eq!(*status, StatusCode::OK);
            prop_assert!(body["response"]["allowed"].is_boolean(), "{}", body);
        }
        let started = context.compilations.started();
        prop_assert!(started >= 1 && started <= at_once, "{} compiled, {} at once", started, at_once);
        prop_assert_eq!(started + throttled, requests.len());
        prop_assert_eq!(context.compilations.throttled(), throttled);
    }
}
