//! The circuit breakers on a real API server, with the deploy/ RBAC. A script annotates 500
//! finished Jobs of one namespace with a TTL already past; under a breaker of 200 deletions a
//! minute, exactly 200 DELETEs go, then the breaker opens: its ConfigMap, its Warning Event, its
//! metrics. Nothing more is deleted there, across a restart of the controller either, until
//! `kubectl retention breaker release`, after which the other 300 go, each once.
//!
//! Twice: with the namespace's breaker (issue 57's sixth reproduction: one tenant's burst held
//! every namespace's deletions), where another namespace's due Jobs are deleted all the while
//! and the release is of that namespace (`-n`); and with the cluster's, which holds them all.
//! This restarts the shared controller, so it runs with the disruptive trials.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use kube_retention_common::breaker::{NamespaceTrip, configmap_name, namespaces_configmap_name};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::audit;
use crate::plugin::kubectl;
use crate::support::{Env, TestNamespace, restart_controller};
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "namespace_circuit_breaker_stops_a_mass_annotation_there_only_until_released",
            |ns| breaker(ns, Scope::Namespace),
        ),
        env.trial(
            "cluster_circuit_breaker_stops_a_mass_annotation_at_its_limit_until_released",
            |ns| breaker(ns, Scope::Cluster),
        ),
    ]
}

const JOBS: usize = 500;
const LIMIT: usize = 200;
/// Due Jobs of another namespace, deleted while the first namespace's breaker is open.
const OTHERS: usize = 5;
/// The controller's namespace, where the breakers' ConfigMaps live.
const CONTROLLER_NAMESPACE: &str = "kube-retention";
const LEASE: &str = "kube-retention-controller";

/// Which breaker a trial opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Namespace,
    Cluster,
}

impl Scope {
    fn flags(self) -> Vec<String> {
        match self {
            Self::Namespace => vec![format!("--circuit-breaker={LIMIT}/1m")],
            Self::Cluster => vec![
                "--circuit-breaker=off".into(),
                format!("--cluster-circuit-breaker={LIMIT}/1m"),
            ],
        }
    }
}

async fn breaker(ns: TestNamespace, scope: Scope) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let started = Timestamp::now();
    let other = TestNamespace::create(&ns.env, "breaker-other").await?;
    restart_controller(&cluster, &scope.flags())?;
    let outcome = stopped_at_the_limit_until_released(&ns, &other, scope, started).await;
    // Whatever happened, the suite goes on with the breakers closed and the usual controller.
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), CONTROLLER_NAMESPACE);
    for name in [configmap_name(LEASE), namespaces_configmap_name(LEASE)] {
        config_maps.delete(&name, &Default::default()).await.ok();
    }
    restart_controller(&cluster, &[])?;
    other.delete().await;
    outcome
}

fn metric(cluster: &LocalCluster, name: &str) -> Result<f64> {
    let metrics = components::http_get(cluster.controller_port, "/metrics")?;
    let line = metrics
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .with_context(|| format!("{name} in /metrics"))?;
    Ok(line.split_whitespace().nth(1).unwrap_or_default().parse()?)
}

/// The DELETEs the controller sent since `started` that the breaker under test counted: of any
/// resource in any namespace for the cluster's (an object of another test that falls due
/// meanwhile takes a place under its limit too), in the namespace for the namespace's.
fn counted_deletes(ns: &TestNamespace, scope: Scope, started: Timestamp) -> Result<Vec<Value>> {
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    Ok(audit::since(ns, &user, started)?
        .into_iter()
        .filter(|event| audit::completed(event, "delete"))
        .filter(|event| {
            scope == Scope::Cluster || event["objectRef"]["namespace"] == ns.name.as_str()
        })
        .collect())
}

/// The DELETEs of `deletes` that were not of this test's Jobs, as `resource namespace/name`.
fn elsewhere(ns: &TestNamespace, deletes: &[Value]) -> Vec<String> {
    deletes
        .iter()
        .map(|event| &event["objectRef"])
        .filter(|object| object["resource"] != "jobs" || object["namespace"] != ns.name.as_str())
        .map(|object| {
            format!(
                "{} {}/{}",
                object["resource"].as_str().unwrap_or_default(),
                object["namespace"].as_str().unwrap_or_default(),
                object["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The last lines of the controller's log that say a request failed, to tell a DELETE that never
/// reached the API server from one that was not sent.
fn failed_requests(cluster: &LocalCluster) -> Vec<String> {
    let log = components::log_lines(cluster, CONTROLLER).unwrap_or_default();
    let mut failed: Vec<String> = log
        .into_iter()
        .filter(|line| line.contains("request failed"))
        .collect();
    failed.split_off(failed.len().saturating_sub(5))
}

/// `count` finished Jobs named `prefix-N` in `namespace`, annotated with a TTL long past.
async fn due_jobs(ns: &TestNamespace, namespace: &str, prefix: &str, count: usize) -> Result<()> {
    let client = &ns.env.client;
    let names: Vec<String> = (0..count)
        .map(|index| format!("{prefix}-{index}"))
        .collect();
    let finished = now_second() - jiff::SignedDuration::from_mins(5);
    stream::iter(&names)
        .map(|name| async move {
            create_job_in(client, namespace, name, json!({})).await?;
            finish_job(client, namespace, name, true, finished).await
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    // The script: every Job of the namespace, a TTL long past.
    kube_retention_e2e::run(ns.env.kubectl().args([
        "annotate",
        "jobs",
        "--all",
        "-n",
        namespace,
        "retention.dev/ttl-after-finished=1s",
    ]))?;
    Ok(())
}

/// The breaker's ConfigMap records its limit and window: the cluster's, or the namespace's key.
async fn stored_trip(ns: &TestNamespace, scope: Scope) -> Result<bool> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), CONTROLLER_NAMESPACE);
    Ok(match scope {
        Scope::Cluster => {
            let Some(stored) = config_maps.get_opt(&configmap_name(LEASE)).await? else {
                return Ok(false);
            };
            let data = stored.data.unwrap_or_default();
            ensure!(
                data.get("limit").map(String::as_str) == Some("200")
                    && data.get("window").map(String::as_str) == Some("1m"),
                "the ConfigMap says the limit and the window: {data:?}"
            );
            true
        }
        Scope::Namespace => {
            let name = namespaces_configmap_name(LEASE);
            let Some(stored) = config_maps.get_opt(&name).await? else {
                return Ok(false);
            };
            let data = stored.data.unwrap_or_default();
            let Some(trip) = data
                .get(&ns.name)
                .and_then(|value| NamespaceTrip::decode(value))
            else {
                return Ok(false);
            };
            ensure!(
                (trip.limit, trip.window.as_str()) == (200, "1m"),
                "the namespace's key says the limit and the window: {trip:?}"
            );
            true
        }
    })
}

async fn stopped_at_the_limit_until_released(
    ns: &TestNamespace,
    other: &TestNamespace,
    scope: Scope,
    started: Timestamp,
) -> Result<()> {
    let client = &ns.env.client;
    let cluster = &ns.env.cluster;
    due_jobs(ns, &ns.name, "swept", JOBS).await?;
    eventually(Duration::from_secs(60), "the breaker's ConfigMap", || {
        stored_trip(ns, scope)
    })
    .await?;
    // Every Job is due: what is not deleted waits for the breaker.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let left =
        || async { Ok::<_, anyhow::Error>(jobs.list(&ListParams::default()).await?.items.len()) };
    eventually(
        Duration::from_secs(30),
        "every Job left held by the breaker",
        || async {
            let held = metric(cluster, "kube_retention_deletions_held_by_circuit_breaker")?;
            Ok(held as usize == left().await?)
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let sent = counted_deletes(ns, scope, started)?;
    ensure!(
        sent.len() == LIMIT,
        "{} DELETEs counted under a breaker of {LIMIT}; not of this test's Jobs: {:?}; the \
         controller's failed requests: {:?}",
        sent.len(),
        elsewhere(ns, &sent),
        failed_requests(cluster)
    );
    let remaining = left().await?;
    ensure!(
        remaining >= JOBS - LIMIT,
        "{} deleted, more than the breaker's {LIMIT}",
        JOBS - remaining
    );
    let (open, open_namespaces) = match scope {
        Scope::Cluster => (1.0, 0.0),
        Scope::Namespace => (0.0, 1.0),
    };
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open")? == open);
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open_namespaces")? == open_namespaces);
    let (regarding, said) = match scope {
        Scope::Cluster => (
            configmap_name(LEASE),
            "more than 200 deletions within 1m: no deletion is sent".to_owned(),
        ),
        Scope::Namespace => (
            namespaces_configmap_name(LEASE),
            format!("more than 200 deletions in namespace {} within 1m", ns.name),
        ),
    };
    let events = kube_retention_e2e::run(ns.env.kubectl().args([
        "get",
        "events",
        "-n",
        CONTROLLER_NAMESPACE,
        "--field-selector",
        &format!("involvedObject.name={regarding},reason=CircuitBreakerOpen"),
        "-o",
        "jsonpath={.items[*].message}",
    ]))?;
    ensure!(
        events.contains(&said),
        "the Warning Event on the ConfigMap: {events:?}"
    );
    let status = kube_retention_e2e::run(kubectl(ns).args(["retention", "breaker", "status"]))?;
    let shown = match scope {
        Scope::Cluster => "the cluster's circuit breaker is open since".to_owned(),
        Scope::Namespace => format!("are open: {} (since", ns.name),
    };
    ensure!(status.contains(&shown), "{status}");

    // Meanwhile another namespace's due Jobs: deleted under a namespace's breaker, held under
    // the cluster's.
    due_jobs(ns, &other.name, "elsewhere", OTHERS).await?;
    let others: Api<Job> = Api::namespaced(client.clone(), &other.name);
    let others_left =
        || async { Ok::<_, anyhow::Error>(others.list(&ListParams::default()).await?.items.len()) };
    match scope {
        Scope::Namespace => {
            eventually(
                Duration::from_secs(30),
                "another namespace's Jobs deleted while this one's breaker is open",
                || async { Ok(others_left().await? == 0) },
            )
            .await?
        }
        Scope::Cluster => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ensure!(
                others_left().await? == OTHERS,
                "the cluster's breaker let another namespace's Jobs go"
            );
        }
    }

    // A restarted controller reads the ConfigMaps before its first DELETE.
    restart_controller(cluster, &scope.flags())?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let counted = counted_deletes(ns, scope, started)?.len();
    ensure!(
        counted == LIMIT && left().await? == remaining,
        "the restarted controller deleted while the breaker was open: {counted} counted"
    );

    let mut release = kubectl(ns);
    release.args(["retention", "breaker", "release"]);
    let said = match scope {
        Scope::Cluster => "released the cluster's circuit breaker".to_owned(),
        Scope::Namespace => {
            release.args(["--namespace", &ns.name]);
            format!("released the circuit breaker of namespace {}", ns.name)
        }
    };
    let released = kube_retention_e2e::run(&mut release)?;
    ensure!(released.contains(&said), "{released}");
    eventually(
        Duration::from_secs(30),
        "every Job deleted after the release",
        || async { Ok(left().await? == 0 && others_left().await? == 0) },
    )
    .await?;
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open")? == 0.0);
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open_namespaces")? == 0.0);
    ensure!(!stored_trip(ns, scope).await?, "the release is stored");
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    let deletes = audit::requests(ns, &user, "delete", "jobs", Some(&ns.name))?;
    let deleted: std::collections::HashSet<&str> = deletes
        .iter()
        .filter(|event| event["responseStatus"]["code"] == 200)
        .filter_map(|event| event["objectRef"]["name"].as_str())
        .collect();
    ensure!(
        deleted.len() == JOBS,
        "{} Jobs deleted by the controller",
        deleted.len()
    );
    Ok(())
}
