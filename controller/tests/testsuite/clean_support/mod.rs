//! A Cleaner's clean against a mocked API server (tower-test): the harness that runs it and
//! records every request in order, the answers the tests share, and Helm's release records as
//! Helm stores them.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use std::sync::Arc;

use base64::Engine;
use http::StatusCode;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, PropagationPolicy};
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_cleaners::act::{Cleaned, Cleaning, clean, retire};
use kube_retention_cleaners::book::{self, Clean, Doomed};
use kube_retention_cleaners::status::Problem;
use kube_retention_controller::executor::Budget;
use serde_json::{Value, json};

/// A request the API server saw: `METHOD path?query`, and its body.
pub type Seen = (String, Value);
/// How the API server answers a request, by method and path.
pub type Answers = fn(&str, &str) -> (StatusCode, Value);

pub fn success() -> (StatusCode, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
    (StatusCode::OK, status)
}

pub fn refusal(code: StatusCode, message: &str) -> (StatusCode, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "code": code.as_u16(), "message": message});
    (code, status)
}

/// Runs `clean` (and the Cleaner's own deletion if it succeeded) against an API server that
/// answers with `answers`; returns the outcome and every request seen, in order.
pub async fn cleaning(group: Clean, answers: Answers) -> (Result<Cleaned, Problem>, Vec<Seen>) {
    cleaning_guarded(group, answers, 0).await
}

/// [`cleaning`] under a blast-radius guard of `threshold` deletions at once (0: none).
pub async fn cleaning_guarded(
    group: Clean,
    answers: Answers,
    threshold: u32,
) -> (Result<Cleaned, Problem>, Vec<Seen>) {
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
        breaker: kube_retention_io::breaker::Breaker::off(),
        client: client.clone(),
        recorder: Recorder::new(client, reporter),
        metrics: Default::default(),
        propagation: PropagationPolicy::Foreground,
        budget: Budget::unlimited(),
        ledger: crate::sink_support::ledger(),
        clock: kube_retention_io::clock::Clock::System,
        max_immediate_deletions: threshold,
    });
    let outcome = clean(cleaning.clone(), group.clone()).await;
    if outcome.is_ok() {
        retire(&cleaning, &group).await.unwrap();
    }
    drop(cleaning);
    (outcome, server.await.unwrap())
}

/// The Cleaner `team/tidy`, deleting ConfigMaps `cm-0`… and uninstalling `release`.
pub fn group(objects: usize, release: Option<&str>) -> Clean {
    Clean {
        cleaner: book::CleanerKey {
            namespace: "team".into(),
            name: "tidy".into(),
        },
        uid: "cleaner-uid".into(),
        generation: Some(1),
        approved: false,
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

pub fn requests(seen: &[Seen]) -> Vec<&str> {
    seen.iter().map(|(line, _)| line.as_str()).collect()
}

/// A release record of `web` as Helm stores it: the `release` key holds base64 of the release
/// (JSON here; Helm gzips it, which decoding accepts too), and the Secret's data is base64 again.
pub fn record(manifest: &str) -> Value {
    let release = json!({"name": "web", "version": 2, "manifest": manifest, "hooks": []});
    let engine = base64::engine::general_purpose::STANDARD;
    let helm = engine.encode(release.to_string());
    json!({"metadata": {"name": "sh.helm.release.v1.web.v2", "namespace": "team",
                        "uid": "uid-record", "resourceVersion": "3",
                        "labels": {"owner": "helm", "name": "web", "version": "2"}},
           "data": {"release": engine.encode(helm)}})
}

/// The list of `web`'s records: one, listing `manifest`.
pub fn secrets(manifest: &str) -> (StatusCode, Value) {
    let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {},
                      "items": [record(manifest)]});
    (StatusCode::OK, list)
}

/// Discovery of the core group: Services, ConfigMaps and PersistentVolumeClaims namespaced,
/// Namespaces not.
pub fn core_resources() -> (StatusCode, Value) {
    let resource = |name: &str, kind: &str, namespaced: bool| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
               "verbs": ["get", "delete", "list"]})
    };
    let list = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                      "resources": [resource("services", "Service", true),
                                    resource("configmaps", "ConfigMap", true),
                                    resource("persistentvolumeclaims", "PersistentVolumeClaim", true),
                                    resource("namespaces", "Namespace", false)]});
    (StatusCode::OK, list)
}

/// An object of `kind` named `name`, with Helm's annotations giving it to `release` in
/// `namespace` where they are given; uid `uid-NAME`, resourceVersion 7.
pub fn object(kind: &str, name: &str, helm: Option<(&str, &str)>) -> (StatusCode, Value) {
    let mut object = json!({"apiVersion": "v1", "kind": kind,
                            "metadata": {"name": name, "namespace": "team",
                                         "uid": format!("uid-{name}"), "resourceVersion": "7"}});
    if let Some((release, namespace)) = helm {
        object["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": release,
                                                   "meta.helm.sh/release-namespace": namespace});
    }
    (StatusCode::OK, object)
}

/// The Cleaners' loop running against `client` (a mocked API server), wired as the controller
/// wires it (no breaker, no budget, no guard, lists in pages), leading; what it needs kept alive
/// goes with it.
pub struct RunningCleaners {
    pub running: tokio::task::JoinHandle<()>,
    _kept: Box<dyn std::any::Any + Send>,
}

pub fn run_cleaners(client: kube::Client) -> RunningCleaners {
    use kube_retention_io::initial_list::{InitialList, Lists};
    use kube_retention_io::status_writes::{self, StatusWrites};

    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let cleaning = Cleaning {
        breaker: kube_retention_io::breaker::Breaker::off(),
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics: Default::default(),
        propagation: PropagationPolicy::Background,
        budget: Budget::unlimited(),
        ledger: crate::sink_support::ledger(),
        clock: kube_retention_io::clock::Clock::System,
        max_immediate_deletions: 0,
    };
    let (evaluator, evaluating) = kube_retention_evaluator::Evaluator::spawn(
        kube_retention_evaluator::EvaluatorMetrics::default(),
        crate::support::evaluator_program(),
        Default::default(),
    )
    .unwrap();
    let (tasks, watching) = kube_retention_runtime::supervise::group("watches");
    let watching_set = kube_retention_io::watch_set::Watching {
        lists: Lists::new(InitialList::Pages, 500),
        turns: kube_retention_io::list_turns::ListTurns::new(1),
        tasks,
        memory: kube_retention_runtime::object_memory::ObjectMemory::new(
            kube_retention_runtime::object_memory::DEFAULT_BYTES,
        ),
    };
    let (leading, leadership) = tokio::sync::watch::channel(true);
    let (statuses, writing) = StatusWrites::spawn(
        client,
        status_writes::RETRY,
        Budget::unlimited(),
        leadership.clone(),
    );
    let cleaners =
        kube_retention_cleaners::Cleaners::new(cleaning, watching_set, statuses, evaluator);
    let running = tokio::spawn(cleaners.run(leadership, std::future::pending()));
    RunningCleaners {
        running,
        _kept: Box::new((evaluating, watching, leading, writing)),
    }
}
