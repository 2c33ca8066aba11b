//! `archiveBeforeDelete` on the real cluster: a policy's sink that answers 503 for 30 seconds
//! while 20 Jobs fall due. No Job is deleted during the outage; after it, every Job is deleted,
//! each only after its `dev.retention.deleted` event (with the Job's final state) was
//! acknowledged: counted, 0 lost and 0 deleted unannounced.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::ListParams;
use kube_retention_common::ledger::{DELETED, Entry};
use serde_json::json;

use super::applied::apply;
use crate::cleaners::sink::Sink;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

const JOBS: usize = 20;
const OUTAGE: Duration = Duration::from_secs(30);

pub async fn nothing_deleted_unannounced(ns: TestNamespace) -> Result<()> {
    let outage_ends = tokio::time::Instant::now() + OUTAGE;
    let sink = Sink::down_until(outage_ends).await?;
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "archived", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttlAfterSucceeded": "1s", "sink": sink.url,
                     "archiveBeforeDelete": true}}),
    )?;
    let client = &ns.env.client;
    let mut uids = BTreeSet::new();
    for index in 0..JOBS {
        let job = create_job_in(client, &ns.name, &format!("archived-{index}"), json!({})).await?;
        uids.insert(job.metadata.uid.unwrap_or_default());
    }
    let finished = now_second();
    for index in 0..JOBS {
        finish_job(
            client,
            &ns.name,
            &format!("archived-{index}"),
            true,
            finished,
        )
        .await?;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let left =
        || async { Ok::<_, anyhow::Error>(jobs.list(&ListParams::default()).await?.items.len()) };
    // During the outage: every Job stays, though due, and the sink is being tried.
    while tokio::time::Instant::now() + Duration::from_secs(1) < outage_ends {
        ensure!(
            left().await? == JOBS,
            "a Job was deleted while its archive sink was down"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ensure!(
        sink.refused() > 0,
        "the sink was not tried during the outage"
    );
    ensure!(sink.received().is_empty(), "acknowledged during the outage");

    eventually(
        Duration::from_secs(60),
        "every Job deleted once the sink is back",
        || async { Ok(left().await? == 0) },
    )
    .await?;
    let mut announced = BTreeSet::new();
    for received in sink.received() {
        ensure!(
            received.headers.get("ce-type").map(String::as_str) == Some(DELETED),
            "{:?}",
            received.headers
        );
        let entry: Entry = serde_json::from_value(received.body)?;
        let object = entry.object.unwrap_or_default();
        ensure!(
            object["metadata"]["uid"] == json!(entry.uid)
                && object["status"]["succeeded"] == json!(1)
                && entry.decided_by == format!("RetentionPolicy {}/archived", ns.name),
            "the event carries the Job's final state: {object}"
        );
        announced.insert(entry.uid);
    }
    let lost: Vec<&String> = uids.difference(&announced).collect();
    ensure!(
        lost.is_empty(),
        "{} of {JOBS} Jobs deleted unannounced: {lost:?}",
        lost.len()
    );
    ensure!(
        announced == uids,
        "events for Jobs not deleted here: {announced:?}"
    );
    Ok(())
}
