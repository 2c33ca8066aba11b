//! Never against the user's intent, on the real cluster: a TTL removed after kube-retention
//! stamped `expires-at` cancels the deletion (webhook on UPDATE, the controller where the
//! webhook does not look), and objects the webhook never saw — in a namespace it skips, or
//! created while it was down — are found and deleted on time.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, ResourceExt};
use kube_retention_common::annotations::EXPIRES_AT;
use kube_retention_e2e::components::{self, WEBHOOK};
use kube_retention_e2e::process::tracked;
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{
    create_buildrun, create_job_in, eventually, finish_buildrun, finish_job, now_second,
    sleep_until,
};

/// The namespace the webhook configurations exclude.
const SKIPPED_NAMESPACE: &str = "kube-system";

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "a_buildrun_whose_ttl_is_removed_after_the_stamp_is_never_deleted",
            buildrun_ttl_removed,
        ),
        env.trial(
            "a_job_whose_ttl_annotation_is_removed_after_the_stamp_is_never_deleted",
            job_ttl_removed,
        ),
        env.trial(
            "in_a_namespace_the_webhook_skips_the_controller_labels_stamps_unstamps_and_deletes",
            skipped_namespace,
        ),
    ]
}

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "a_job_created_while_the_webhook_was_down_is_found_and_deleted",
        created_while_webhook_down,
    )]
}

/// Checks that an object whose TTL was removed outlives its old deadline and loses the stamp.
async fn outlives_its_old_deadline<G, Fut>(get: G, old_deadline: jiff::Timestamp) -> Result<()>
where
    G: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Option<Value>>>,
{
    sleep_until(old_deadline + SignedDuration::from_secs(3)).await;
    let object = get()
        .await?
        .context("deleted although its TTL was removed before its deadline")?;
    let stamp = object.pointer("/metadata/annotations/retention.dev~1expires-at");
    ensure!(stamp.is_none(), "the stale stamp stayed: {stamp:?}");
    Ok(())
}

async fn buildrun_ttl_removed(ns: TestNamespace) -> Result<()> {
    let runs = ns.dynamic(&shipwright("BuildRun"));
    create_buildrun(&ns, "run", "app", json!({"ttlAfterSucceeded": "5s"})).await?;
    let finished = now_second();
    finish_buildrun(&ns, "run", true, finished).await?;
    eventually(Duration::from_secs(4), "expires-at stamped", || async {
        Ok(runs
            .get("run")
            .await?
            .annotations()
            .contains_key(EXPIRES_AT))
    })
    .await?;
    let remove = json!({"spec": {"retention": null}});
    runs.patch("run", &PatchParams::default(), &Patch::Merge(&remove))
        .await?;
    outlives_its_old_deadline(
        || async {
            Ok(runs
                .get_opt("run")
                .await?
                .map(serde_json::to_value)
                .transpose()?)
        },
        finished + SignedDuration::from_secs(5),
    )
    .await
}

async fn remove_ttl_annotation(jobs: &Api<Job>, name: &str) -> Result<()> {
    let patch = json!({"metadata": {"annotations": {"retention.dev/ttl-after-succeeded": null}}});
    jobs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn get_job(jobs: &Api<Job>, name: &str) -> Result<Option<Value>> {
    Ok(jobs
        .get_opt(name)
        .await?
        .map(serde_json::to_value)
        .transpose()?)
}

/// A finished Job with a 5 s TTL, stamped; then the TTL is removed and it must stay.
async fn ttl_removed_from_job(client: &kube::Client, namespace: &str, name: &str) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let ttl = json!({"retention.dev/ttl-after-succeeded": "5s"});
    create_job_in(client, namespace, name, ttl).await?;
    let finished = now_second();
    finish_job(client, namespace, name, true, finished).await?;
    // In a skipped namespace the controller must find the Job and stamp it itself.
    eventually(Duration::from_secs(4), "expires-at stamped", || async {
        let job = jobs.get(name).await?;
        Ok(job.annotations().contains_key(EXPIRES_AT))
    })
    .await?;
    remove_ttl_annotation(&jobs, name).await?;
    outlives_its_old_deadline(
        || get_job(&jobs, name),
        finished + SignedDuration::from_secs(5),
    )
    .await
}

async fn job_ttl_removed(ns: TestNamespace) -> Result<()> {
    ttl_removed_from_job(&ns.env.client, &ns.name, "job").await
}

/// A Job in kube-system (which the webhook configurations exclude) named after the test's
/// namespace, deleted when the test ends whatever happened.
async fn in_skipped_namespace<F, Fut>(ns: &TestNamespace, body: F) -> Result<()>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let names = [format!("{}-a", ns.name), format!("{}-b", ns.name)];
    let outcome = body(ns.name.clone()).await;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), SKIPPED_NAMESPACE);
    for name in names {
        jobs.delete(&name, &DeleteParams::background()).await.ok();
    }
    outcome
}

async fn skipped_namespace(ns: TestNamespace) -> Result<()> {
    let client = ns.env.client.clone();
    in_skipped_namespace(&ns, |prefix| async move {
        let unstamped = format!("{prefix}-a");
        ttl_removed_from_job(&client, SKIPPED_NAMESPACE, &unstamped).await?;
        let due = format!("{prefix}-b");
        let jobs: Api<Job> = Api::namespaced(client.clone(), SKIPPED_NAMESPACE);
        let created = Instant::now();
        create_job_in(
            &client,
            SKIPPED_NAMESPACE,
            &due,
            json!({"retention.dev/ttl-after-finished": "2s"}),
        )
        .await?;
        let finished = now_second();
        finish_job(&client, SKIPPED_NAMESPACE, &due, true, finished).await?;
        eventually(
            Duration::from_secs(30),
            "the Job the webhook never saw deleted within 30 s",
            || async { Ok(jobs.get_opt(&due).await?.is_none()) },
        )
        .await?;
        let deadline = finished + SignedDuration::from_secs(2);
        let late = jiff::Timestamp::now().duration_since(deadline);
        ensure!(
            late < SignedDuration::from_secs(2),
            "deleted {late} after its deadline ({:?} after creation)",
            created.elapsed()
        );
        Ok(())
    })
    .await
}

async fn created_while_webhook_down(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let webhook = tracked(&cluster.layout.state_dir, &[WEBHOOK]).remove(0);
    webhook.stop(Duration::from_secs(10))?;
    // The annotated hooks fail open: the Job is created, unlabelled and unstamped.
    let created = create_job_in(
        &ns.env.client,
        &ns.name,
        "unseen",
        json!({"retention.dev/ttl-after-finished": "2s"}),
    )
    .await;
    components::start_webhook(&cluster)?;
    components::wait_for_admission(&cluster, Duration::from_secs(30))?;
    let job = created?;
    ensure!(
        !job.labels().contains_key("retention.dev/managed"),
        "the webhook was down, yet the Job was labelled: {:?}",
        job.labels()
    );
    let finished = now_second();
    finish_job(&ns.env.client, &ns.name, "unseen", true, finished).await?;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(30),
        "the Job created while the webhook was down deleted within 30 s",
        || async { Ok(jobs.get_opt("unseen").await?.is_none()) },
    )
    .await?;
    let late = jiff::Timestamp::now().duration_since(finished + SignedDuration::from_secs(2));
    ensure!(late < SignedDuration::from_secs(2), "deleted {late} late");
    Ok(())
}
