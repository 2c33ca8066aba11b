//! The blast-radius guard on the real cluster: a policy change that would delete 150 Jobs at once
//! deletes none and says so (AwaitingApproval, with the count), a user who may not delete Jobs
//! cannot approve it, and `kubectl retention approve` lets all 150 go. The policy has a `match`
//! expression, so its objects are judged off the loop and the count waits for them.

use std::time::Duration;

use anyhow::{Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

use super::applied::{apply, ready, status};
use crate::plugin::kubectl as kubectl_with_plugin;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second};
use crate::writers::{bind_editor, kubectl_as};

const JOBS: usize = 150;

fn policy(ns: &TestNamespace, ttl: &str) -> Value {
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
           "metadata": {"name": "guarded", "namespace": ns.name},
           "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                    // An expression, so that each Job is judged off the loop: the count must
                    // wait for those answers too.
                    "match": "object.metadata.name.startsWith('job-')",
                    "ttlAfterSucceeded": ttl}})
}

async fn jobs_left(ns: &TestNamespace) -> Result<usize> {
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    Ok(jobs
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len())
}

pub async fn mass_deletion_waits_for_approval(ns: TestNamespace) -> Result<()> {
    apply(&ns, &policy(&ns, "24h"))?;
    let finished = now_second();
    let (client, namespace) = (&ns.env.client, ns.name.as_str());
    stream::iter(0..JOBS)
        .map(|index| async move {
            let name = format!("job-{index}");
            create_job_in(client, namespace, &name, json!({})).await?;
            finish_job(client, namespace, &name, true, finished).await
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    let accepted = eventually(
        Duration::from_secs(30),
        "the first generation, deleting nothing at once, is accepted",
        || async {
            let status = status(&ns, false, "guarded").await?;
            Ok(ready(&status).1 == "Active" && status["acceptedGeneration"] == 1)
        },
    )
    .await;
    if let Err(error) = accepted {
        let status = status(&ns, false, "guarded").await?;
        anyhow::bail!("{error:#}; the policy's status: {status}");
    }

    // A day cut to a second: all 150 are due at once, above the controller's 100.
    apply(&ns, &policy(&ns, "1s"))?;
    eventually(
        Duration::from_secs(30),
        "the policy awaits approval, counting 150 Jobs",
        || async {
            let (_, reason, message) = ready(&status(&ns, false, "guarded").await?);
            Ok(reason == "AwaitingApproval"
                && message.contains("150 objects at once (Job.batch 150)"))
        },
    )
    .await?;
    let awaiting = status(&ns, false, "guarded").await?;
    ensure!(awaiting["acceptedGeneration"] == 1, "{awaiting}");
    ensure!(
        awaiting["held"].as_array().map(Vec::len) == Some(20),
        "a sample of 20: {awaiting}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        jobs_left(&ns).await? == JOBS,
        "deleted while awaiting approval"
    );

    // An editor of policies who may not delete Jobs cannot approve their deletion.
    let user = format!("approver-{}", ns.name);
    bind_editor(&ns, &user)?;
    let output = kubectl_as(&ns, &user)
        .args([
            "annotate",
            "retentionpolicy",
            "guarded",
            "retention.dev/approved-generation=2",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        !output.status.success(),
        "approved by a user who may not delete Jobs"
    );
    ensure!(
        stderr.contains("you may not delete jobs.batch in namespace"),
        "{stderr}"
    );
    ensure!(
        stderr.contains("approve a retention policy's deletions"),
        "{stderr}"
    );

    let output = kubectl_with_plugin(&ns)
        .args(["retention", "approve", "policy", "guarded", "-n", &ns.name])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        stdout.starts_with("approved generation 2 of RetentionPolicy"),
        "{stdout}"
    );
    eventually(
        Duration::from_secs(60),
        "all 150 Jobs are deleted once approved",
        || async { Ok(jobs_left(&ns).await? == 0) },
    )
    .await?;
    eventually(
        Duration::from_secs(30),
        "generation 2 is accepted",
        || async {
            let status = status(&ns, false, "guarded").await?;
            Ok(ready(&status).1 == "Active" && status["acceptedGeneration"] == 2)
        },
    )
    .await
}
