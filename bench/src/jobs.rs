//! Jobs for the controller benchmark: created many at a time, finished through the status
//! subresource at a chosen second, and watched so each deletion is timed where the API server
//! reports it. Every Job carries both deleters' settings (the annotation and
//! `ttlSecondsAfterFinished`), so both scenarios delete identical objects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::json;

const CONCURRENCY: usize = 32;

pub fn name(index: usize) -> String {
    format!("job-{index:06}")
}

/// Creates `count` Jobs named `job-000000`…, each expiring `ttl_seconds` after it finishes.
pub async fn create(
    client: &Client,
    namespace: &str,
    count: usize,
    ttl_seconds: u32,
) -> Result<()> {
    create_range(client, namespace, 0..count, ttl_seconds).await
}

/// Creates the Jobs numbered `indexes` (see [`create`]).
pub async fn create_range(
    client: &Client,
    namespace: &str,
    indexes: std::ops::Range<usize>,
    ttl_seconds: u32,
) -> Result<()> {
    each(client, namespace, indexes.map(name), |jobs, name| async move {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name,
                         "annotations": {"retention.dev/ttl-after-finished": format!("{ttl_seconds}s")}},
            "spec": {"ttlSecondsAfterFinished": ttl_seconds,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}))?;
        jobs.create(&PostParams::default(), &job).await?;
        Ok(())
    })
    .await
}

/// Marks the Jobs `indexes` succeeded at `at` (whole seconds), as the job controller would.
pub async fn finish(
    client: &Client,
    namespace: &str,
    indexes: impl Iterator<Item = usize>,
    at: Timestamp,
) -> Result<()> {
    finish_named(client, namespace, indexes.map(name), at).await
}

/// [`finish`], for the Jobs named `names`.
pub async fn finish_named(
    client: &Client,
    namespace: &str,
    names: impl Iterator<Item = String>,
    at: Timestamp,
) -> Result<()> {
    let at = at.to_string();
    let status = json!({"status": {"startTime": at, "completionTime": at, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
        {"type": "Complete", "status": "True", "lastTransitionTime": at}]}});
    let status = &status;
    each(client, namespace, names, |jobs, name| async move {
        jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        Ok(())
    })
    .await
}

/// Labels the Jobs `indexes` with the time they expire, `expiry`, for Kyverno's cleanup
/// controller ([`crate::kyverno`]), which deletes them in the background.
pub async fn label_expiry(
    client: &Client,
    namespace: &str,
    indexes: impl Iterator<Item = usize>,
    expiry: Timestamp,
) -> Result<()> {
    label_expiry_named(client, namespace, indexes.map(name), expiry).await
}

/// [`label_expiry`], for the Jobs named `names`.
pub async fn label_expiry_named(
    client: &Client,
    namespace: &str,
    names: impl Iterator<Item = String>,
    expiry: Timestamp,
) -> Result<()> {
    let patch = json!({"metadata": {
        "labels": {crate::kyverno::TTL_LABEL: crate::kyverno::ttl_label_value(expiry)},
        "annotations": {crate::kyverno::PROPAGATION_ANNOTATION: "Background"}}});
    let patch = &patch;
    each(client, namespace, names, |jobs, name| async move {
        jobs.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    })
    .await
}

/// Runs `request` for each Job of `names` in `namespace`, [`CONCURRENCY`] at a time; the first
/// error ends it.
async fn each<F, Fut>(
    client: &Client,
    namespace: &str,
    names: impl Iterator<Item = String>,
    request: F,
) -> Result<()>
where
    F: Fn(Api<Job>, String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    stream::iter(names)
        .map(|name| request(jobs.clone(), name))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// When each Job's deletion was seen, by name.
pub type Deletions = Arc<Mutex<HashMap<String, Timestamp>>>;

/// How long the benchmark's watch may go without listing another Job before it gives up.
const LIST_STALL: std::time::Duration = std::time::Duration::from_secs(300);

/// How many times the benchmark's watch may begin its list before it gives up.
const LIST_ATTEMPTS: usize = 3;

/// Watches the namespace's Jobs' metadata in the background and records each deletion's time;
/// returns once the watch has listed them, so a deletion after the return is timed when the API
/// server reports it, not when a list of many Jobs ends. The list is streamed, as
/// kube-retention's are: a paged list of a million Jobs outlives etcd's compaction and begins
/// again. It gives up when the list stalls (5 minutes without a Job: a million Jobs may take
/// longer than that to list) or has begun it four times.
pub async fn watch_deletions(
    client: &Client,
    namespace: &str,
) -> Result<(Deletions, tokio::task::JoinHandle<()>)> {
    let deletions: Deletions = Arc::default();
    let jobs: Api<PartialObjectMeta<Job>> = Api::namespaced(client.clone(), namespace);
    let seen = deletions.clone();
    let (listed_tx, mut listed) = tokio::sync::oneshot::channel();
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0_usize);
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        // With a backoff: once the API server is gone, a watcher without one retries at once,
        // forever, and takes a core with it.
        let config = watcher::Config::default().streaming_lists();
        let mut events = watcher::watcher(jobs, config).default_backoff().boxed();
        let mut attempts = 0;
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) if listed_tx.is_some() => {
                    attempts += 1;
                    if attempts > LIST_ATTEMPTS {
                        // Ends the task: the wait below reports it.
                        return;
                    }
                }
                Ok(Event::InitApply(_)) => {
                    progress_tx.send_modify(|listed| *listed += 1);
                }
                Ok(Event::InitDone) => {
                    if let Some(listed) = listed_tx.take() {
                        listed.send(()).ok();
                    }
                }
                Ok(Event::Delete(job)) => {
                    if let Some(name) = job.metadata.name
                        && let Ok(mut seen) = seen.lock()
                    {
                        seen.insert(name, Timestamp::now());
                    }
                }
                _ => {}
            }
        }
    });
    loop {
        tokio::select! {
            done = &mut listed => {
                done.with_context(|| format!(
                    "the benchmark's watch of the Jobs ended, or began its list {} times, after \
                     listing {}",
                    LIST_ATTEMPTS + 1,
                    *progress.borrow()
                ))?;
                return Ok((deletions, task));
            }
            moved = tokio::time::timeout(LIST_STALL, progress.changed()) => {
                if moved.is_err() {
                    // Not left behind: the run goes on (or ends) without this watch.
                    task.abort();
                    anyhow::bail!(
                        "the benchmark's watch of the Jobs listed none for {LIST_STALL:?} after {}",
                        *progress.borrow()
                    );
                }
            }
        }
    }
}

pub fn deleted(deletions: &Deletions) -> usize {
    deletions.lock().map(|seen| seen.len()).unwrap_or(0)
}

/// Waits until `count` deletions were seen, failing after `limit`.
pub async fn wait_deleted(
    deletions: &Deletions,
    count: usize,
    limit: std::time::Duration,
) -> Result<()> {
    let started = std::time::Instant::now();
    while deleted(deletions) < count {
        anyhow::ensure!(
            started.elapsed() <= limit,
            "{} of {count} Jobs deleted after {limit:?}",
            deleted(deletions)
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok(())
}
