//! What finding objects the webhook never saw costs: Jobs with a TTL annotation are created while
//! the webhook is stopped (so unlabelled), then kube-retention's controller starts fresh and the
//! benchmark measures how long until every one carries `retention.dev/managed`, which requests the
//! controller sent (from the audit log), and how many bytes a metadata-only LIST of them moves
//! compared with a LIST of whole objects.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ListParams, PartialObjectMeta};
use kube::{Api, Client};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::audit_lists::{ListStart, list_start};
use kube_retention_e2e::components::{self, WEBHOOK};
use kube_retention_e2e::process::tracked;
use serde_json::Value;

use crate::deleters::{self, Deleter, Work};

pub struct Figures {
    pub objects: usize,
    /// From the controller's start (it was listed and ready) to the last Job labelled.
    pub labelled_after: Duration,
    pub lists: usize,
    pub patches: usize,
    pub metadata_list_bytes: usize,
    pub full_list_bytes: usize,
    pub metadata_list_seconds: f64,
}

/// The JSON size of every item of `api`'s namespace, listed in pages of 500, and how long it took.
async fn list_bytes<K>(api: &Api<K>) -> Result<(usize, f64)>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let started = Instant::now();
    let mut params = ListParams::default().limit(500);
    let mut bytes = 0;
    loop {
        let page = api.list(&params).await?;
        bytes += page
            .items
            .iter()
            .map(|item| serde_json::to_vec(item).map_or(0, |json| json.len()))
            .sum::<usize>();
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((bytes, started.elapsed().as_secs_f64())),
        }
    }
}

async fn count_items(api: &Api<PartialObjectMeta<Job>>, params: ListParams) -> Result<usize> {
    let mut params = params.limit(500);
    let mut items = 0;
    loop {
        let page = api.list(&params).await?;
        items += page.items.len();
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// Requests of `user` after `offset` in the audit log: lists of Jobs anywhere (paged or
/// streamed), PATCHes in `namespace`.
fn requests(
    cluster: &LocalCluster,
    offset: usize,
    user: &str,
    namespace: &str,
) -> Result<(usize, usize)> {
    let log = std::fs::read(cluster.layout.audit_log())?;
    let (mut lists, mut patches) = (0, 0);
    for line in log[offset.min(log.len())..].split(|byte| *byte == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user || event["objectRef"]["resource"] != "jobs" {
            continue;
        }
        match list_start(&event) {
            Some(ListStart::Paged | ListStart::Streamed) => lists += 1,
            Some(ListStart::Refused) => {}
            None if event["verb"] == "patch" && event["objectRef"]["namespace"] == namespace => {
                patches += 1;
            }
            None => {}
        }
    }
    Ok((lists, patches))
}

pub async fn measure(
    cluster: &LocalCluster,
    client: &Client,
    count: usize,
    metrics_port: u16,
) -> Result<Figures> {
    let namespace = "bench-discovery";
    crate::namespace(client, namespace).await?;
    let webhook = tracked(&cluster.layout.state_dir, &[WEBHOOK]).remove(0);
    webhook.stop(Duration::from_secs(10))?;
    println!("creating {count} Jobs while the webhook is stopped");
    let created = crate::jobs::create(client, namespace, count, 86_400).await;
    components::start_webhook(cluster)?;
    components::wait_for_admission(cluster, Duration::from_secs(60))?;
    created?;
    let metadata: Api<PartialObjectMeta<Job>> = Api::namespaced(client.clone(), namespace);
    let full: Api<Job> = Api::namespaced(client.clone(), namespace);
    let (metadata_list_bytes, metadata_list_seconds) = list_bytes(&metadata).await?;
    let (full_list_bytes, _) = list_bytes(&full).await?;
    let offset = std::fs::metadata(cluster.layout.audit_log())?.len() as usize;
    let started = Instant::now();
    let running = deleters::start(
        cluster,
        Deleter::KubeRetention,
        Some(50),
        metrics_port,
        Work::Deleting,
    )?;
    let labelled =
        ListParams::default().labels(kube_retention_common::annotations::MANAGED_SELECTOR);
    let labelled_after = loop {
        // The API server gives no remainingItemCount for label-selected lists: count the pages.
        let done = count_items(&metadata, labelled.clone()).await?;
        if done >= count {
            break started.elapsed();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "only {done} of {count} labelled"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let (lists, patches) = requests(cluster, offset, &Deleter::KubeRetention.user(), namespace)?;
    drop(running);
    crate::remove_namespace(cluster, namespace)?;
    Ok(Figures {
        objects: count,
        labelled_after,
        lists,
        patches,
        metadata_list_bytes,
        full_list_bytes,
        metadata_list_seconds,
    })
}

/// The `controller-discovery` section.
pub fn section(figures: &Figures) -> String {
    let per = |bytes: usize| bytes as f64 / figures.objects as f64;
    let at_100k = |bytes: usize| per(bytes) * 100_000.0 / 1024.0 / 1024.0;
    format!(
        "### Finding objects the webhook never saw\n\n\
         Measured with `make bench-controller` (`bench/src/discovery.rs`): {n} Jobs with a\n\
         `retention.dev/ttl-after-finished` annotation are created while the webhook is stopped, so\n\
         none is labelled `retention.dev/managed`; then kube-retention's controller ({build}) starts\n\
         fresh (50 req/s budget). Besides its labelled watch it runs a metadata-only watch of the Jobs\n\
         and Pods without the label, remembers only annotated, unlabelled objects, and labels each once,\n\
         within the request budget (so many stragglers are labelled at the budget's pace).\n\n\
         | Jobs | all labelled after start | lists of Jobs (streamed or paged) | PATCHes | metadata LIST | whole-object LIST |\n\
         | --- | --- | --- | --- | --- | --- |\n\
         | {n} | {labelled:.1} s | {lists} | {patches} | {meta:.1} MiB ({meta_per:.0} B/object, {meta_s:.1} s) | {full:.1} MiB ({full_per:.0} B/object) |\n\n\
         API cost at 100,000 objects of a kind, from these per-object figures: at start one\n\
         metadata list of the unlabelled ones, about {meta_100k:.0} MiB if none is labelled (streamed, or\n\
         200 pages of 500 where the API server refuses that), beside the labelled list — a\n\
         whole-object list of every object would be {full_100k:.0} MiB; then one metadata-only watch\n\
         (one event per change of an unlabelled object of the kind, metadata only); one PATCH per unlabelled\n\
         object with retention settings, once; nothing per unannotated object. The controller's\n\
         memory holds only the unlabelled ones until labelled.\n",
        build = crate::measured_build(),
        n = figures.objects,
        labelled = figures.labelled_after.as_secs_f64(),
        lists = figures.lists,
        patches = figures.patches,
        meta = figures.metadata_list_bytes as f64 / 1024.0 / 1024.0,
        meta_per = per(figures.metadata_list_bytes),
        meta_s = figures.metadata_list_seconds,
        full = figures.full_list_bytes as f64 / 1024.0 / 1024.0,
        full_per = per(figures.full_list_bytes),
        meta_100k = at_100k(figures.metadata_list_bytes),
        full_100k = at_100k(figures.full_list_bytes),
    )
}
