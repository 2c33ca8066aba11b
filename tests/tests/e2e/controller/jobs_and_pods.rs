//! Jobs and Pods, the built-in kinds with annotations: each outcome's TTL, and a Pod deleted
//! only once finished.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams, ResourceExt};
use serde_json::{Value, json};

use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second, sleep_until};

async fn create_job(ns: &TestNamespace, name: &str, annotations: Value) -> Result<()> {
    create_job_in(&ns.env.client, &ns.name, name, annotations).await?;
    Ok(())
}

pub(super) async fn jobs(ns: TestNamespace) -> Result<()> {
    let annotations =
        json!({"retention.dev/ttl-after-failed": "2s", "retention.dev/ttl-after-succeeded": "1h"});
    create_job(&ns, "fails", annotations.clone()).await?;
    create_job(&ns, "succeeds", annotations).await?;
    let finished = now_second();
    finish_job(&ns.env.client, &ns.name, "fails", false, finished).await?;
    finish_job(&ns.env.client, &ns.name, "succeeds", true, finished).await?;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(Duration::from_secs(6), "the failed Job deleted", || async {
        Ok(jobs.get_opt("fails").await?.is_none())
    })
    .await?;
    sleep_until(finished + SignedDuration::from_secs(3)).await;
    let kept = jobs
        .get_opt("succeeds")
        .await?
        .context("the succeeded Job (1h) was deleted")?;
    let stamped = kept.annotations().get("retention.dev/expires-at").cloned();
    ensure!(
        stamped == Some((finished + SignedDuration::from_hours(1)).to_string()),
        "{stamped:?}"
    );
    Ok(())
}

pub(super) async fn pods(ns: TestNamespace) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "done", "annotations": {"retention.dev/ttl-after-finished": "1s"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}))?;
    pods.create(&PostParams::default(), &pod).await?;
    let unfinished: Pod = serde_json::from_value(json!({
        "metadata": {"name": "still-running", "annotations": {"retention.dev/ttl-after-finished": "1s"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}))?;
    pods.create(&PostParams::default(), &unfinished).await?;
    let at = now_second().to_string();
    let status = json!({"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "image": "busybox",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "startedAt": at, "finishedAt": at}}}]}});
    pods.patch_status("done", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    eventually(
        Duration::from_secs(5),
        "the finished Pod deleted",
        || async { Ok(pods.get_opt("done").await?.is_none()) },
    )
    .await?;
    ensure!(
        pods.get_opt("still-running").await?.is_some(),
        "an unfinished Pod was deleted"
    );
    Ok(())
}
