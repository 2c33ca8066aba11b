//! The restart part of `make bench-controller`: many Jobs tracked, some of them overdue, and
//! kube-retention's controller started cold against them, as after an upgrade or a crash. How
//! soon after its start the first overdue Job is gone (it deletes while the list is still under
//! way), when the list ends, and when the last overdue Job is gone, against the pace its request
//! budget allows (one request per deletion).

use std::time::Duration;

use anyhow::{Context, Result};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;

use crate::deleters::{self, Deleter, Work};
use crate::{jobs, metrics_port, mib, namespace, rss_kib};

const NAMESPACE: &str = "bench-restart";
/// The overdue Jobs' TTL; they finished twice that long before the start.
const TTL_SECONDS: u32 = 60;

/// The scenario's size.
pub struct Size {
    pub tracked: usize,
    pub due: usize,
    pub budget: u32,
}

pub struct Figures {
    pub size: Size,
    pub first_deletion: f64,
    pub listed: f64,
    pub last_deletion: f64,
    pub peak_rss_kib: u64,
}

impl Size {
    /// Every `stride`-th Job is overdue, so each page of the list holds some.
    fn stride(&self) -> usize {
        (self.tracked / self.due.max(1)).max(1)
    }

    fn overdue(&self) -> impl Iterator<Item = usize> + Clone {
        (0..self.tracked).step_by(self.stride()).take(self.due)
    }

    /// The time the budget needs for the overdue Jobs, one DELETE each.
    pub fn at_budget_pace(&self) -> f64 {
        self.due as f64 / f64::from(self.budget)
    }
}

/// Seconds from `start` to `at`.
fn since(start: Timestamp, at: Timestamp) -> f64 {
    at.duration_since(start).as_secs_f64()
}

pub async fn measure(cluster: &LocalCluster, client: &kube::Client, size: Size) -> Result<Figures> {
    namespace(client, NAMESPACE).await?;
    println!("creating {} Jobs to track", size.tracked);
    jobs::create(client, NAMESPACE, size.tracked, TTL_SECONDS).await?;
    let finished = Timestamp::now() - SignedDuration::from_secs(2 * i64::from(TTL_SECONDS));
    println!("finishing {} of them, overdue", size.due);
    jobs::finish(client, NAMESPACE, size.overdue(), finished).await?;
    let (deletions, watch) = jobs::watch_deletions(client, NAMESPACE).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = Timestamp::now();
    let running = deleters::start(
        cluster,
        Deleter::KubeRetention,
        Some(size.budget),
        metrics_port()?,
        Work::Deleting,
    )?;
    let listed = since(start, Timestamp::now());
    let limit = Duration::from_secs(120) + Duration::from_secs_f64(2.0 * size.at_budget_pace());
    jobs::wait_deleted(&deletions, size.due, limit).await?;
    watch.abort();
    let peak_rss_kib = running.pid().and_then(rss_kib).map_or(0, |(peak, _)| peak);
    drop(running);
    let seen: Vec<Timestamp> = deletions
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .values()
        .copied()
        .collect();
    let first = seen.iter().min().context("no deletions")?;
    let last = seen.iter().max().context("no deletions")?;
    let figures = Figures {
        first_deletion: since(start, *first),
        listed,
        last_deletion: since(start, *last),
        peak_rss_kib,
        size,
    };
    crate::remove_namespace(cluster, NAMESPACE)?;
    Ok(figures)
}

/// The `controller-restart` section.
pub fn section(figures: &Figures) -> String {
    let size = &figures.size;
    format!(
        "### Restart at scale\n\n\
         Measured with `make bench-controller` (`bench/src/restart.rs`): {tracked} Jobs exist, every\n\
         {stride}th of them ({due}) finished {overdue} s ago with a {ttl} s TTL while no controller ran;\n\
         then kube-retention's controller ({build}) starts cold with a budget of {budget} req/s.\n\
         Times count from its start (process spawn) to each Job's deletion as the benchmark's own\n\
         watch sees it (a metadata watch that has listed every Job before the start, so it reports\n\
         each deletion as it happens); \"listed\" is when its /readyz first answered 200 (every kind\n\
         listed). It deletes while the list is still under way: a page's overdue Jobs are due as\n\
         soon as they are seen. Goals:\n\
         the first deletion within 3 s of the start, the last at the budget's pace.\n\n\
         | Jobs tracked | overdue | budget | first deletion (s) | listed (s) | last deletion (s) | at the budget's pace (s) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n\
         | {tracked} | {due} | {budget} req/s | {first:.2} | {listed:.2} | {last:.1} | {pace:.1} | {rss:.1} |\n",
        build = crate::measured_build(),
        tracked = size.tracked,
        stride = size.stride(),
        due = size.due,
        overdue = 2 * TTL_SECONDS,
        ttl = TTL_SECONDS,
        budget = size.budget,
        first = figures.first_deletion,
        listed = figures.listed,
        last = figures.last_deletion,
        pace = size.at_budget_pace(),
        rss = mib(figures.peak_rss_kib),
    )
}
