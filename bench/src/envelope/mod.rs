//! `make bench-controller BENCH_ARGS=--huge`: the scale where clusters suffer. A million Jobs (or
//! `--huge-jobs`) exist; at a tenth of them, and again at all of them, what each deleter and the
//! control plane hold; then, with a tenth overdue, each deleter started cold against them
//! ([`restart::cold_start`]): kube-retention first, then, on another tenth, kube-controller-manager's
//! TTL controller and garbage collector. Growth per Job comes from the two sizes. Not in the
//! default run: creating the Jobs alone takes most of an hour on two cores.
//!
//! The largest size this machine holds is found, not assumed: Jobs are created 100,000 at a
//! time, and creating stops once the machine's available memory falls below a reserve kept for
//! the cold starts; the section says where and why. The control plane's kube-controller-manager
//! is stopped for the run (its garbage collector would hold a graph of every Job), and each
//! deleter is the kernel's first choice should memory run out anyway, so a deleter that cannot
//! hold a million Jobs is reported as such rather than taking the API server down with it.

use std::time::{Duration, Instant};

use anyhow::Result;
use kube_retention_e2e::LocalCluster;

use crate::deleters::Deleter;
use crate::memory::{self, Reading};
use crate::restart::{self, ColdStart, TTL_SECONDS};
use crate::{jobs, mib, namespace, pid_of, rss_kib};

const NAMESPACE: &str = "bench-envelope";
/// Jobs created between two looks at the machine's memory.
const STEP: usize = 100_000;

/// The run's size.
pub struct Size {
    /// The Jobs to create, unless the machine's memory runs short first.
    pub jobs: usize,
    /// The request budget of the cold starts, requests per second.
    pub budget: u32,
    /// The machine's available memory (KiB) below which no more Jobs are created: what the cold
    /// starts still need.
    pub reserve_kib: u64,
    /// kube-apiserver's `GOMEMLIMIT` for the run, if any.
    pub apiserver_memory_limit: Option<String>,
}

impl Size {
    /// The smaller size, where the first readings are taken.
    fn tenth(&self) -> usize {
        self.jobs / 10
    }

    /// The overdue Jobs of kube-retention's cold start (`offset` 0) or the peer's (`offset` 5):
    /// every tenth Job, so every page of a list holds some.
    fn overdue(&self, offset: usize) -> impl Iterator<Item = usize> {
        (offset..self.jobs).step_by(10)
    }

    fn at_budget_pace(&self) -> f64 {
        self.tenth() as f64 / f64::from(self.budget)
    }
}

/// The control plane's resident memory (peak, current), in KiB.
#[derive(Clone, Copy)]
pub struct ControlPlane {
    pub apiserver: (u64, u64),
    /// kube-apiserver's live heap (Go's `go_gc_heap_live_bytes`) in KiB: what its objects
    /// hold, without the garbage collector's headroom.
    pub apiserver_live_heap: Option<u64>,
    pub etcd: (u64, u64),
}

async fn control_plane(cluster: &LocalCluster, client: &kube::Client) -> ControlPlane {
    let read = |name: &str| pid_of(cluster, name).and_then(rss_kib).unwrap_or_default();
    ControlPlane {
        apiserver: read("kube-apiserver"),
        apiserver_live_heap: live_heap_kib(client).await,
        etcd: read("etcd"),
    }
}

/// kube-apiserver's live heap from its /metrics, in KiB; none if it cannot be read.
async fn live_heap_kib(client: &kube::Client) -> Option<u64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let metrics = client.request_text(request).await.ok()?;
    let bytes: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("go_gc_heap_live_bytes "))?
        .trim()
        .parse()
        .ok()?;
    Some((bytes / 1024.0) as u64)
}

pub struct Figures {
    /// The size reached: `size.jobs` is the Jobs created.
    pub size: Size,
    /// The Jobs asked for, and why fewer were created if they were.
    pub target: usize,
    /// The size of the first readings: a tenth of the Jobs asked for.
    pub smaller: usize,
    pub stopped: Option<String>,
    /// Seconds spent creating the Jobs.
    pub creating: f64,
    pub tracking: Vec<Reading>,
    /// At a tenth of the Jobs, at all of them, and at the end.
    pub control_plane: [ControlPlane; 3],
    pub cold_starts: Vec<(Deleter, ColdStart)>,
    /// The cold starts that could not be measured, and why.
    pub failed: Vec<(Deleter, String)>,
}

pub async fn measure(
    cluster: &LocalCluster,
    client: &kube::Client,
    mut size: Size,
) -> Result<Figures> {
    if let Some(limit) = &size.apiserver_memory_limit {
        cluster.restart_apiserver_with_memory_limit(limit)?;
        // The client's pooled connections went with the old process; a request that fails on
        // one is not the run's failure.
        let mut attempts = 0;
        while let Err(error) = client.apiserver_version().await {
            attempts += 1;
            anyhow::ensure!(attempts < 10, "kube-apiserver after its restart: {error}");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    namespace(client, NAMESPACE).await?;
    // Nothing here needs it: the Jobs have no dependents, and the peer's cold start runs a
    // garbage collector of its own. Its graph holds every Job (1.66 GB at 200,000), memory the
    // larger sizes need for the rest.
    cluster.stop_controller_manager()?;
    let mut creating = Duration::ZERO;
    let mut tracking = Vec::new();
    let mut created = 0;
    let mut readings = Vec::new();
    let mut stopped = None;
    for checkpoint in [size.tenth(), size.jobs] {
        while created < checkpoint && stopped.is_none() {
            if let Some(short) = memory_short(size.reserve_kib) {
                println!("{created} Jobs created; {short}");
                stopped = Some(short);
                break;
            }
            let until = (created + STEP).min(checkpoint);
            let started = Instant::now();
            jobs::create_range(client, NAMESPACE, created..until, TTL_SECONDS).await?;
            creating += started.elapsed();
            created = until;
            println!("{created} Jobs created ({:.0} s)", creating.as_secs_f64());
        }
        anyhow::ensure!(
            created >= size.tenth(),
            "no readings: the machine's memory ran short at {created} Jobs, before a tenth of \
             {}",
            size.jobs
        );
        readings.push(control_plane(cluster, client).await);
        tracking.push(memory::read(cluster, Deleter::KubeRetention, created).await?);
        if checkpoint == size.tenth() {
            tracking.push(memory::read(cluster, Deleter::Peer, created).await?);
        }
    }
    let (target, smaller) = (size.jobs, size.tenth());
    size.jobs = created;
    let pace = Duration::from_secs_f64(2.0 * size.at_budget_pace());
    let (mut cold_starts, mut failed) = (Vec::new(), Vec::new());
    for (deleter, offset, limit) in [
        (Deleter::KubeRetention, 0, Duration::from_secs(900) + pace),
        // Five requests per deletion against kube-retention's one, and whole Jobs to list.
        (Deleter::Peer, 5, Duration::from_secs(1_200) + 2 * pace),
    ] {
        let start = restart::cold_start(
            cluster,
            client,
            NAMESPACE,
            size.overdue(offset),
            deleter,
            size.budget,
            limit,
        )
        .await;
        match start {
            Ok(start) => {
                println!("{}: {}", deleter.label(), cold_start_text(&size, &start));
                cold_starts.push((deleter, start));
            }
            // What happened is the finding: a deleter that cannot run at this size is reported.
            Err(error) => {
                let error = format!("{error:#}");
                println!("{}: {error}", deleter.label());
                failed.push((deleter, error));
            }
        }
    }
    readings.push(control_plane(cluster, client).await);
    Ok(Figures {
        creating: creating.as_secs_f64(),
        target,
        smaller,
        stopped,
        size,
        tracking,
        control_plane: [readings[0], readings[1], readings[2]],
        cold_starts,
        failed,
    })
}

/// Why no more Jobs may be created, if the machine's available memory is below `reserve_kib`.
fn memory_short(reserve_kib: u64) -> Option<String> {
    let available = crate::available_memory_kib()?;
    (available < reserve_kib).then(|| {
        format!(
            "stopped there: the machine had {:.1} GiB of memory available, less than the {:.1} GiB \
             kept for the cold starts (`--huge-reserve-gib`)",
            gib(available),
            gib(reserve_kib)
        )
    })
}

fn gib(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), |seconds| format!("{seconds:.2}"))
}

fn cold_start_text(size: &Size, start: &ColdStart) -> String {
    format!(
        "{} of {} overdue deleted; first {} s, listed {} s, last {} s; RSS {:.1} MiB, peak {:.1} MiB{}",
        start.deleted,
        size.tenth(),
        seconds(start.first_deletion),
        seconds(start.listed),
        seconds(start.last_deletion),
        mib(start.rss_kib),
        mib(start.peak_rss_kib),
        start
            .ended
            .as_ref()
            .map_or(String::new(), |ended| format!("; {ended}")),
    )
}

/// Bytes per Job between two readings (KiB) at two sizes.
fn per_job(smaller: (usize, u64), larger: (usize, u64)) -> String {
    if larger.0 <= smaller.0 {
        return "–".to_owned();
    }
    let bytes = (larger.1 as f64 - smaller.1 as f64) * 1024.0;
    format!("{:.0}", bytes / (larger.0 - smaller.0) as f64)
}

mod goals;
mod section;
pub use section::section;
