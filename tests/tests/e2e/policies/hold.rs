//! A policy's `holdWhile` on the real cluster: a Job held until it is archived outlives its
//! deadline, says so in `kubectl retention explain` and the policy's status, and goes within two
//! seconds of the edit that makes the expression false.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::applied::{apply, ready, status};
use crate::plugin::kubectl;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

const ARCHIVED: &str = "example.com/archived";

pub async fn held_until_archived(ns: TestNamespace) -> Result<()> {
    let hold = format!(
        "!has(object.metadata.annotations) || !('{ARCHIVED}' in object.metadata.annotations)"
    );
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "archived-first", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttlAfterSucceeded": "2s", "holdWhile": hold}}),
    )?;
    let client = &ns.env.client;
    create_job_in(client, &ns.name, "unarchived", json!({})).await?;
    let finished = now_second();
    finish_job(client, &ns.name, "unarchived", true, finished).await?;
    let deadline = finished + SignedDuration::from_secs(2);

    eventually(
        Duration::from_secs(20),
        "the policy's status counts the Job on hold",
        || async {
            let status = status(&ns, false, "archived-first").await?;
            let (_, _, message) = ready(&status);
            Ok(status["onHold"] == 1 && message.contains("1 of them on hold (spec.holdWhile)"))
        },
    )
    .await?;
    while Timestamp::now() < deadline + SignedDuration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    ensure!(
        jobs.get_opt("unarchived").await?.is_some(),
        "deleted past its deadline while on hold"
    );
    let explained = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "explain",
        "job",
        "unarchived",
        "-n",
        &ns.name,
        "-o",
        "json",
    ]))?;
    let explained: serde_json::Value = serde_json::from_str(&explained)?;
    ensure!(
        explained["onHold"] == true
            && explained["note"]
                .as_str()
                .is_some_and(|note| note.starts_with("on hold: spec.holdWhile of RetentionPolicy")),
        "explain says it is on hold: {explained}"
    );

    let archived = json!({"metadata": {"annotations": {ARCHIVED: "yes"}}});
    jobs.patch(
        "unarchived",
        &PatchParams::default(),
        &Patch::Merge(&archived),
    )
    .await?;
    eventually(
        Duration::from_secs(2),
        "the archived Job deleted within 2 s",
        || async { Ok(jobs.get_opt("unarchived").await?.is_none()) },
    )
    .await
}
