//! `make bench-controller BENCH_ARGS=--huge`: the scale where clusters suffer. A million Jobs (or
//! `--huge-jobs`) exist; at a tenth of them, and again at all of them, what each deleter and the
//! control plane hold; then, with a tenth overdue, each deleter started cold against them
//! ([`restart::cold_start`]): kube-retention first, then, on another tenth, kube-controller-manager's
//! TTL controller and garbage collector. Growth per Job comes from the two sizes. Not in the
//! default run: creating the Jobs alone takes most of an hour on two cores.

use std::time::{Duration, Instant};

use anyhow::Result;
use kube_retention_e2e::LocalCluster;

use crate::deleters::Deleter;
use crate::memory::{self, Reading};
use crate::restart::{self, ColdStart, TTL_SECONDS};
use crate::{jobs, mib, namespace, pid_of, rss_kib};

const NAMESPACE: &str = "bench-envelope";

/// The run's size.
pub struct Size {
    pub jobs: usize,
    /// The request budget of the cold starts, requests per second.
    pub budget: u32,
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

/// The control plane's resident memory, in KiB.
#[derive(Clone, Copy)]
pub struct ControlPlane {
    pub apiserver: (u64, u64),
    pub etcd: (u64, u64),
}

fn control_plane(cluster: &LocalCluster) -> ControlPlane {
    let read = |name: &str| pid_of(cluster, name).and_then(rss_kib).unwrap_or_default();
    ControlPlane {
        apiserver: read("kube-apiserver"),
        etcd: read("etcd"),
    }
}

pub struct Figures {
    pub size: Size,
    /// Seconds spent creating the Jobs.
    pub creating: f64,
    pub tracking: Vec<Reading>,
    /// At a tenth of the Jobs, at all of them, and at the end.
    pub control_plane: [ControlPlane; 3],
    pub cold_starts: Vec<(Deleter, ColdStart)>,
    /// The cold starts that could not be measured, and why.
    pub failed: Vec<(Deleter, String)>,
}

pub async fn measure(cluster: &LocalCluster, client: &kube::Client, size: Size) -> Result<Figures> {
    namespace(client, NAMESPACE).await?;
    let mut creating = Duration::ZERO;
    let mut tracking = Vec::new();
    let mut created = 0;
    let mut readings = Vec::new();
    for checkpoint in [size.tenth(), size.jobs] {
        for step in (created..checkpoint).step_by(100_000) {
            let until = (step + 100_000).min(checkpoint);
            let started = Instant::now();
            jobs::create_range(client, NAMESPACE, step..until, TTL_SECONDS).await?;
            creating += started.elapsed();
            println!("{until} Jobs created ({:.0} s)", creating.as_secs_f64());
        }
        created = checkpoint;
        readings.push(control_plane(cluster));
        tracking.push(memory::read(cluster, Deleter::KubeRetention, checkpoint).await?);
        if checkpoint == size.tenth() {
            tracking.push(memory::read(cluster, Deleter::Peer, checkpoint).await?);
        }
    }
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
    readings.push(control_plane(cluster));
    Ok(Figures {
        creating: creating.as_secs_f64(),
        size,
        tracking,
        control_plane: [readings[0], readings[1], readings[2]],
        cold_starts,
        failed,
    })
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
        if start.alive {
            ""
        } else {
            "; the process had ended"
        },
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

mod section;
pub use section::section;
