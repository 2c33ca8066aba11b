//! The circuit breaker on a real API server, with the deploy/ RBAC. A script annotates 500
//! finished Jobs with a TTL already past; under a breaker of 200 deletions a minute, exactly 200
//! DELETEs go, then the breaker opens: its ConfigMap, its Warning Event, its metrics. Nothing
//! more is deleted, across a restart of the controller either, until `kubectl retention breaker
//! release`, after which the other 300 go, each once. This restarts the shared controller, so it
//! runs with the disruptive trials.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use kube_retention_common::breaker::configmap_name;
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
    vec![env.trial(
        "circuit_breaker_stops_a_mass_annotation_at_its_limit_until_released",
        breaker,
    )]
}

const JOBS: usize = 500;
const LIMIT: usize = 200;
/// The controller's namespace, where the breaker's ConfigMap lives.
const CONTROLLER_NAMESPACE: &str = "kube-retention";

fn flags() -> Vec<String> {
    vec![format!("--circuit-breaker={LIMIT}/1m")]
}

async fn breaker(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let started = Timestamp::now();
    restart_controller(&cluster, &flags())?;
    let outcome = stopped_at_the_limit_until_released(&ns, started).await;
    // Whatever happened, the suite goes on with the breaker closed and the usual controller.
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), CONTROLLER_NAMESPACE);
    let name = configmap_name("kube-retention-controller");
    config_maps.delete(&name, &Default::default()).await.ok();
    restart_controller(&cluster, &[])?;
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

/// Every DELETE the controller sent since `started`, of any resource in any namespace: the
/// breaker counts them all, so an object of another test that falls due meanwhile takes a
/// place under the limit too.
fn controller_deletes(ns: &TestNamespace, started: Timestamp) -> Result<Vec<Value>> {
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    Ok(audit::since(ns, &user, started)?
        .into_iter()
        .filter(|event| audit::completed(event, "delete"))
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

async fn stopped_at_the_limit_until_released(ns: &TestNamespace, started: Timestamp) -> Result<()> {
    let client = &ns.env.client;
    let cluster = &ns.env.cluster;
    let names: Vec<String> = (0..JOBS).map(|index| format!("swept-{index}")).collect();
    let finished = now_second() - jiff::SignedDuration::from_mins(5);
    stream::iter(&names)
        .map(|name| async move {
            create_job_in(client, &ns.name, name, json!({})).await?;
            finish_job(client, &ns.name, name, true, finished).await
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    // The script: every Job of the namespace, a TTL long past.
    kube_retention_e2e::run(ns.kubectl().args([
        "annotate",
        "jobs",
        "--all",
        "retention.dev/ttl-after-finished=1s",
    ]))?;

    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), CONTROLLER_NAMESPACE);
    let name = configmap_name("kube-retention-controller");
    eventually(
        Duration::from_secs(60),
        "the breaker's ConfigMap",
        || async { Ok(config_maps.get_opt(&name).await?.is_some()) },
    )
    .await?;
    let stored = config_maps.get(&name).await?.data.unwrap_or_default();
    ensure!(
        stored.get("limit").map(String::as_str) == Some("200")
            && stored.get("window").map(String::as_str) == Some("1m"),
        "the ConfigMap says the limit and the window: {stored:?}"
    );
    // Every Job is due: what is not deleted waits for the breaker.
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
    let sent = controller_deletes(ns, started)?;
    ensure!(
        sent.len() == LIMIT,
        "{} DELETEs sent under a breaker of {LIMIT}; not of this test's Jobs: {:?}; the \
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
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open")? == 1.0);
    let events = kube_retention_e2e::run(ns.env.kubectl().args([
        "get",
        "events",
        "-n",
        CONTROLLER_NAMESPACE,
        "--field-selector",
        &format!("involvedObject.name={name},reason=CircuitBreakerOpen"),
        "-o",
        "jsonpath={.items[*].message}",
    ]))?;
    ensure!(
        events.contains("more than 200 deletions within 1m: no deletion is sent"),
        "the Warning Event on the ConfigMap: {events:?}"
    );
    let status = kube_retention_e2e::run(kubectl(ns).args(["retention", "breaker", "status"]))?;
    ensure!(
        status.contains("the circuit breaker is open since"),
        "{status}"
    );

    // A restarted controller reads the ConfigMap before its first DELETE.
    restart_controller(cluster, &flags())?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    ensure!(
        controller_deletes(ns, started)?.len() == LIMIT && left().await? == remaining,
        "the restarted controller deleted while the breaker was open"
    );

    let released = kube_retention_e2e::run(kubectl(ns).args(["retention", "breaker", "release"]))?;
    ensure!(
        released.contains("released the circuit breaker"),
        "{released}"
    );
    eventually(
        Duration::from_secs(30),
        "every Job deleted after the release",
        || async { Ok(left().await? == 0) },
    )
    .await?;
    ensure!(metric(cluster, "kube_retention_circuit_breaker_open")? == 0.0);
    ensure!(config_maps.get_opt(&name).await?.is_none());
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
