//! `kubectl retention explain` and `upcoming` give the controller's decision: the deadline the
//! controller stamped for a BuildRun and the field that decided it, as written; a Job's deadline
//! under a RetentionPolicy, named with the policy's field and value; a kept Job that never goes,
//! and the annotation that keeps it; `upcoming` lists the deadlines soonest first.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube_retention_common::api::RetentionPolicy;
use serde_json::{Value, json};

use super::{job, job_finished_at, kubectl};
use crate::support::{TestNamespace, shipwright};
use crate::workloads::{create_buildrun, eventually, finish_buildrun, now_second};

fn explain(ns: &TestNamespace, kind: &str, name: &str) -> Result<Value> {
    let said = kube_retention_e2e::run(kubectl(ns).args([
        "retention",
        "explain",
        kind,
        name,
        "-n",
        &ns.name,
        "-o",
        "json",
    ]))?;
    Ok(serde_json::from_str(&said)?)
}

pub async fn explain_and_upcoming(ns: TestNamespace) -> Result<()> {
    let policy: RetentionPolicy = serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "nightly-jobs"},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "selector": {"matchLabels": {"app": "nightly"}}, "ttlAfterSucceeded": "2h"}}))?;
    kube::Api::<RetentionPolicy>::namespaced(ns.env.client.clone(), &ns.name)
        .create(&PostParams::default(), &policy)
        .await?;
    let finished = now_second() - SignedDuration::from_mins(5);
    create_buildrun(&ns, "run-1", "hello", json!({"ttlAfterSucceeded": "1h"})).await?;
    finish_buildrun(&ns, "run-1", true, finished).await?;
    // Finished at `finished`, which its expected deadline counts from: the clock read again
    // may have passed into the next second (1.36's matrix run at ca9dfac saw it).
    job_finished_at(
        &ns,
        "nightly-1",
        json!({"app": "nightly"}),
        json!({}),
        Some(finished),
    )
    .await?;
    job(
        &ns,
        "kept-1",
        json!({}),
        json!({"retention.dev/keep": "true", "retention.dev/ttl": "1m"}),
        Some(5),
    )
    .await?;

    // The controller stamps the BuildRun once it sees it finished.
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let stamp = || async {
        let run = runs.get("run-1").await?;
        let annotations = run.metadata.annotations.unwrap_or_default();
        Ok::<_, anyhow::Error>(annotations.get("retention.dev/expires-at").cloned())
    };
    eventually(
        Duration::from_secs(10),
        "the BuildRun is stamped",
        || async { Ok(stamp().await?.is_some()) },
    )
    .await?;
    let stamped: Timestamp = stamp().await?.context("stamped")?.parse()?;
    let run = explain(&ns, "buildruns", "run-1")?;
    ensure!(
        run["deadline"] == stamped.to_string(),
        "explain {run} against expires-at {stamped}"
    );
    ensure!(
        run["source"] == "spec.retention.ttlAfterSucceeded: 1h" && run["state"] == "succeeded",
        "{run}"
    );
    ensure!(
        run["setting"]
            == json!({"kind": "field", "name": "spec.retention.ttlAfterSucceeded",
                      "value": "1h", "from": null}),
        "{run}"
    );

    let nightly = explain(&ns, "job", "nightly-1")?;
    let expected = finished + SignedDuration::from_hours(2);
    ensure!(
        nightly["deadline"] == expected.to_string(),
        "the Job's deadline: {nightly}, expected {expected}"
    );
    let policy = format!("RetentionPolicy {}/nightly-jobs", ns.name);
    ensure!(
        nightly["source"] == format!("{policy}: ttlAfterSucceeded 2h"),
        "{nightly}"
    );
    ensure!(
        nightly["setting"]
            == json!({"kind": "policy", "name": "ttlAfterSucceeded", "value": "2h",
                      "from": policy}),
        "{nightly}"
    );

    let kept = explain(&ns, "jobs.batch", "kept-1")?;
    ensure!(kept["deadline"].is_null(), "{kept}");
    ensure!(
        kept["note"] == "never deleted: annotated retention.dev/keep: \"true\"",
        "{kept}"
    );
    // `keep` decides, not the `ttl` beside it.
    ensure!(
        kept["source"] == "annotation retention.dev/keep: true",
        "{kept}"
    );
    let table = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "explain",
        "job",
        "kept-1",
        "-n",
        &ns.name,
    ]))?;
    ensure!(
        table.starts_with("NAMESPACE")
            && table.contains("annotation retention.dev/keep: true")
            && table.contains("never deleted"),
        "{table}"
    );

    let upcoming = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "upcoming",
        "-n",
        &ns.name,
        "-o",
        "json",
    ]))?;
    let upcoming: Value = serde_json::from_str(&upcoming)?;
    let order: Vec<&str> = upcoming
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    ensure!(
        order == ["run-1", "nightly-1"],
        "upcoming, soonest first: {upcoming}"
    );
    let within = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "upcoming",
        "-n",
        &ns.name,
        "--within",
        "90m",
        "-o",
        "json",
    ]))?;
    let within: Value = serde_json::from_str(&within)?;
    ensure!(
        within.as_array().map(Vec::len) == Some(1) && within[0]["name"] == "run-1",
        "within 90m: {within}"
    );
    Ok(())
}
