//! A Cleaner's clean against a mocked API server (tower-test), the exact requests asserted: its
//! objects deleted with uid preconditions and the propagation policy, an object already gone
//! or replaced by a namesake skipped, a failure stopping the clean before anything else is
//! deleted; a Helm release read before anything is deleted, its objects (found through
//! discovery) and records deleted after the targets, a cluster-scoped object refusing the
//! release whole; and the Cleaner deleting itself, exactly itself.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use base64::Engine;
use http::StatusCode;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, PropagationPolicy};
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_controller::cleaners::act::{Cleaning, clean, retire};
use kube_retention_controller::cleaners::book::{self, Clean, Doomed};
use kube_retention_controller::executor::Budget;
use kube_retention_controller::sinks::Sender;
use serde_json::{Value, json};

/// A request the API server saw: `METHOD path?query`, and its body.
type Seen = (String, Value);
/// How the API server answers a request, by method and path.
type Answers = fn(&str, &str) -> (StatusCode, Value);

fn success() -> (StatusCode, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
    (StatusCode::OK, status)
}

fn refusal(code: StatusCode, message: &str) -> (StatusCode, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "code": code.as_u16(), "message": message});
    (code, status)
}

/// Runs `clean` (and the Cleaner's own deletion if it succeeded) against an API server that
/// answers with `answers`; returns what it answered and every request seen, in order.
async fn cleaning(group: Clean, answers: Answers) -> (Result<Vec<String>, String>, Vec<Seen>) {
    let (client, mut api) = kube_retention_apimock::pair();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(received) = api.next().await {
            let (status, answer) = answers(&received.method, &received.path);
            seen.push((received.line(), received.body.clone()));
            received.reply(status.as_u16(), &answer);
        }
        seen
    });
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let cleaning = Arc::new(Cleaning {
        breaker: kube_retention_controller::breaker::Breaker::off(),
        client: client.clone(),
        recorder: Recorder::new(client, reporter),
        metrics: Default::default(),
        propagation: PropagationPolicy::Foreground,
        budget: Budget::unlimited(),
        sender: Arc::new(Sender::new(Arc::new(SinkPolicy::default()))),
        ledger: None,
    });
    let outcome = match clean(cleaning.clone(), group.clone()).await {
        Ok(cleaned) => {
            retire(&cleaning, &group).await.unwrap();
            Ok(cleaned.deleted)
        }
        Err(problem) => Err(problem.to_string()),
    };
    drop(cleaning);
    (outcome, server.await.unwrap())
}

fn group(objects: usize, release: Option<&str>) -> Clean {
    Clean {
        cleaner: book::CleanerKey {
            namespace: "team".into(),
            name: "tidy".into(),
        },
        uid: "cleaner-uid".into(),
        objects: (0..objects)
            .map(|n| Doomed {
                resource: ApiResource::erase::<ConfigMap>(&()),
                namespace: "team".into(),
                name: format!("cm-{n}"),
                uid: format!("uid-{n}"),
            })
            .collect(),
        release: release.map(str::to_owned),
        sink: None,
    }
}

fn requests(seen: &[Seen]) -> Vec<&str> {
    seen.iter().map(|(line, _)| line.as_str()).collect()
}

#[tokio::test]
async fn targets_go_with_uid_preconditions_then_the_cleaner_itself() {
    let (outcome, seen) = cleaning(group(2, None), |_, _| success()).await;
    assert_eq!(outcome.unwrap(), ["ConfigMap/cm-0", "ConfigMap/cm-1"]);
    assert_eq!(
        requests(&seen),
        [
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "DELETE /api/v1/namespaces/team/configmaps/cm-1",
            "DELETE /apis/retention.dev/v1alpha1/namespaces/team/cleaners/tidy",
        ]
    );
    assert_eq!(seen[0].1["preconditions"], json!({"uid": "uid-0"}));
    assert_eq!(seen[0].1["propagationPolicy"], "Foreground");
    assert_eq!(seen[2].1["preconditions"], json!({"uid": "cleaner-uid"}));
}

#[tokio::test]
async fn a_target_already_gone_or_replaced_is_skipped_not_a_failure() {
    let answers: Answers = |_, path| match path {
        p if p.ends_with("/cm-0") => refusal(StatusCode::NOT_FOUND, "gone"),
        p if p.ends_with("/cm-1") => refusal(StatusCode::CONFLICT, "uid precondition failed"),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(3, None), answers).await;
    assert_eq!(outcome.unwrap(), ["ConfigMap/cm-2"]);
    assert_eq!(seen.len(), 4, "{:?}", requests(&seen));
}

#[tokio::test]
async fn a_failed_deletion_stops_the_clean_and_the_cleaner_stays() {
    let answers: Answers = |_, path| match path {
        p if p.ends_with("/cm-1") => refusal(StatusCode::FORBIDDEN, "no delete for you"),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(3, None), answers).await;
    let problem = outcome.unwrap_err();
    assert!(problem.contains("no delete for you"), "{problem}");
    assert_eq!(
        requests(&seen),
        [
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "DELETE /api/v1/namespaces/team/configmaps/cm-1",
        ],
        "nothing after the failure, the Cleaner least of all"
    );
}

/// A release record as Helm stores it: the `release` key holds base64 of the release (JSON here;
/// Helm gzips it, which decoding accepts too), and the Secret's data is base64 again.
fn record(manifest: &str) -> Value {
    let release = json!({"name": "web", "version": 2, "manifest": manifest, "hooks": []});
    let engine = base64::engine::general_purpose::STANDARD;
    let helm = engine.encode(release.to_string());
    json!({"metadata": {"name": "sh.helm.release.v1.web.v2", "namespace": "team",
                        "labels": {"owner": "helm", "name": "web", "version": "2"}},
           "data": {"release": engine.encode(helm)}})
}

fn secrets(manifest: &str) -> (StatusCode, Value) {
    let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {},
                      "items": [record(manifest)]});
    (StatusCode::OK, list)
}

/// Discovery of the core group: Services and ConfigMaps namespaced, Namespaces not.
fn core_resources() -> (StatusCode, Value) {
    let resource = |name: &str, kind: &str, namespaced: bool| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
               "verbs": ["delete", "list"]})
    };
    let list = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                      "resources": [resource("services", "Service", true),
                                    resource("configmaps", "ConfigMap", true),
                                    resource("namespaces", "Namespace", false)]});
    (StatusCode::OK, list)
}

const MANIFEST: &str = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n";

#[tokio::test]
async fn a_release_is_read_first_and_uninstalled_after_the_targets() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(MANIFEST),
        ("GET", "/api/v1") => core_resources(),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    assert_eq!(outcome.unwrap(), ["ConfigMap/cm-0", "Service/web"]);
    assert_eq!(
        requests(&seen),
        [
            "GET /api/v1/namespaces/team/secrets?&labelSelector=owner%3Dhelm%2Cname%3Dweb",
            "GET /api/v1",
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "DELETE /api/v1/namespaces/team/services/web",
            "DELETE /api/v1/namespaces/team/secrets/sh.helm.release.v1.web.v2",
            "DELETE /apis/retention.dev/v1alpha1/namespaces/team/cleaners/tidy",
        ]
    );
}

#[tokio::test]
async fn a_release_with_a_cluster_scoped_object_is_refused_before_anything_is_deleted() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n\
             ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: elsewhere\n",
        ),
        ("GET", "/api/v1") => core_resources(),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    let problem = outcome.unwrap_err();
    assert!(
        problem.contains("outside namespace team") && problem.contains("elsewhere"),
        "{problem}"
    );
    assert!(
        seen.iter().all(|(line, _)| line.starts_with("GET ")),
        "nothing deleted: {:?}",
        requests(&seen)
    );
}
