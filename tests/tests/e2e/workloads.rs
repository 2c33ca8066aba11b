//! Workloads as the e2e tests make them, and waiting on the clock: BuildRuns and Jobs created and
//! finished through their status subresource, as Shipwright's or the job controller would, and
//! polling until a condition holds.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kube_retention_common::annotations::EXPIRES_AT;
use serde_json::{Value, json};

use crate::support::{TestNamespace, object, shipwright};

/// Now, in the whole seconds Kubernetes stores times in.
pub fn now_second() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

pub async fn create_buildrun(
    ns: &TestNamespace,
    name: &str,
    build: &str,
    retention: Value,
) -> Result<DynamicObject> {
    let run = object(
        &shipwright("BuildRun"),
        json!({"metadata": {"name": name, "labels": {"build.shipwright.io/name": build}},
               "spec": {"build": {"name": build}, "retention": retention}}),
    )?;
    Ok(ns
        .dynamic(&shipwright("BuildRun"))
        .create(&PostParams::default(), &run)
        .await?)
}

pub async fn finish_buildrun(
    ns: &TestNamespace,
    name: &str,
    succeeded: bool,
    at: Timestamp,
) -> Result<()> {
    let status = json!({"status": {"completionTime": at.to_string(), "conditions": [{
        "type": "Succeeded", "status": if succeeded { "True" } else { "False" },
        "reason": if succeeded { "Succeeded" } else { "Failed" }, "message": "set by the test",
        "lastTransitionTime": at.to_string()}]}});
    ns.dynamic(&shipwright("BuildRun"))
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Polls until `check` says true, or fails after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    until_some(timeout, what, || {
        let checked = check();
        async move { Ok(checked.await?.then_some(())) }
    })
    .await
}

/// Polls until `check` finds something, and answers it, or fails after `timeout`.
pub async fn until_some<T, F, Fut>(timeout: Duration, what: &str, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    until_some_every(POLL, timeout, what, check).await
}

/// How often [`eventually`] and [`until_some`] ask.
const POLL: Duration = Duration::from_millis(50);

/// Polls every `every` until `check` says true, or fails after `timeout`: for checks that list
/// many objects while a scenario measures, where asking twenty times a second would load the API
/// server the scenario measures (the deletions' times come from the scenario's watch, not from
/// when the check saw them gone).
pub async fn eventually_every<F, Fut>(
    every: Duration,
    timeout: Duration,
    what: &str,
    mut check: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    until_some_every(every, timeout, what, || {
        let checked = check();
        async move { Ok(checked.await?.then_some(())) }
    })
    .await
}

async fn until_some_every<T, F, Fut>(
    every: Duration,
    timeout: Duration,
    what: &str,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(found) = check().await? {
            return Ok(found);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "not within {timeout:?}: {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// What the controller writes on a finished run before deleting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// Its deadline as `retention.dev/expires-at` (`--stamp=finished`, as the suites run it).
    Deadline,
    /// Nothing: one request per deletion, the DELETE (`--stamp=never`, the chart's default).
    Absent,
}

/// The run's `retention.dev/expires-at` stamp, if it has one.
fn expires_at(run: &DynamicObject) -> Option<&str> {
    run.annotations().get(EXPIRES_AT).map(String::as_str)
}

/// The BuildRun `name` gets `retention.dev/expires-at` = `expiry` (with [`Stamp::Deadline`]; no
/// stamp at all with [`Stamp::Absent`]), still exists 300 ms before it and is gone within 3 s
/// after.
pub async fn expect_deleted_on_time(
    ns: &TestNamespace,
    name: &str,
    expiry: Timestamp,
    stamp: Stamp,
) -> Result<()> {
    let runs = ns.dynamic(&shipwright("BuildRun"));
    if stamp == Stamp::Deadline {
        let deadline = expiry.to_string();
        eventually(Duration::from_secs(5), "expires-at stamped", || async {
            Ok(runs
                .get_opt(name)
                .await?
                .is_some_and(|run| expires_at(&run) == Some(deadline.as_str())))
        })
        .await?;
    }
    sleep_until(expiry - jiff::SignedDuration::from_millis(300)).await;
    let run = runs
        .get_opt(name)
        .await?
        .with_context(|| format!("deleted before its expiry {expiry}"))?;
    if stamp == Stamp::Absent {
        ensure!(
            expires_at(&run).is_none(),
            "stamped, though the controller writes no stamps: {:?}",
            expires_at(&run)
        );
    }
    eventually(Duration::from_secs(3), "deleted", || async {
        Ok(runs.get_opt(name).await?.is_none())
    })
    .await?;
    let late = Timestamp::now().duration_since(expiry);
    ensure!(
        late <= jiff::SignedDuration::from_secs(1),
        "deleted {late:?} after its expiry"
    );
    Ok(())
}

pub async fn sleep_until(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if let Ok(wait) = Duration::try_from(wait) {
        tokio::time::sleep(wait).await;
    }
}

/// Creates a Job that never runs (no job controller here): tests set its status.
pub async fn create_job_in(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    annotations: Value,
) -> Result<Job> {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}))?;
    Ok(Api::<Job>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &job)
        .await?)
}

/// Creates a Job of about `bulk` bytes, which never runs, with `labels` and `annotations`.
pub async fn bulky_job(
    ns: &TestNamespace,
    name: &str,
    labels: Value,
    annotations: Value,
    bulk: usize,
) -> Result<Job> {
    let environment: Vec<Value> = (0..bulk / 1_000)
        .map(|index| json!({"name": format!("BULK_{index:04}"), "value": "v".repeat(990)}))
        .collect();
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "env": environment}]}}}}))?;
    Ok(Api::<Job>::namespaced(ns.env.client.clone(), &ns.name)
        .create(&PostParams::default(), &job)
        .await?)
}

/// Marks a Job finished through its status subresource, with the conditions the job controller
/// sets (SuccessCriteriaMet or FailureTarget first).
pub async fn finish_job(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    succeeded: bool,
    at: Timestamp,
) -> Result<()> {
    let at = at.to_string();
    let status = if succeeded {
        json!({"status": {"startTime": at, "completionTime": at, "succeeded": 1, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
            {"type": "Complete", "status": "True", "lastTransitionTime": at}]}})
    } else {
        json!({"status": {"startTime": at, "failed": 1, "conditions": [
            {"type": "FailureTarget", "status": "True", "lastTransitionTime": at},
            {"type": "Failed", "status": "True", "lastTransitionTime": at}]}})
    };
    Api::<Job>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}
