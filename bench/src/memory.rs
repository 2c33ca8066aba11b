//! The memory part of `make bench-controller`: unfinished Jobs to track, at each of several
//! sizes, and each deleter started fresh against them. The peak (VmHWM) includes the listing;
//! the growth per object between sizes shows what one more object costs.

use std::time::Duration;

use anyhow::{Context, Result};
use kube_retention_e2e::LocalCluster;

use crate::deleters::{self, Deleter, Work};
use crate::{jobs, metrics_port, mib, namespace, rss_kib};

const NAMESPACE: &str = "bench-memory";

/// One deleter's reading at one size, in KiB.
pub struct Reading {
    pub deleter: Deleter,
    pub jobs: usize,
    pub rss_kib: u64,
    pub peak_kib: u64,
    /// Seconds from its start until kube-retention's /readyz answered 200 (every kind listed).
    pub listed: Option<f64>,
}

/// Time to list and settle: 20 s, and a second more per 10,000 Jobs.
pub(crate) fn settle(jobs: usize) -> Duration {
    Duration::from_secs(20 + u64::try_from(jobs / 10_000).unwrap_or(u64::MAX))
}

/// Readings at each of `sizes` (ascending), both deleters each.
pub async fn measure(
    cluster: &LocalCluster,
    client: &kube::Client,
    sizes: &[usize],
) -> Result<Vec<Reading>> {
    namespace(client, NAMESPACE).await?;
    let mut readings = Vec::new();
    let mut created = 0;
    for &size in sizes {
        println!("creating Jobs {created}..{size} to track");
        jobs::create_range(client, NAMESPACE, created..size.max(created), 86_400).await?;
        created = created.max(size);
        for deleter in [Deleter::KubeRetention, Deleter::Peer] {
            readings.push(read(cluster, deleter, size).await?);
        }
    }
    crate::remove_namespace(cluster, NAMESPACE)?;
    Ok(readings)
}

/// `deleter` started fresh against the `jobs` Jobs that exist, tracking them: its RSS once it
/// has listed them and settled, and its peak.
pub async fn read(cluster: &LocalCluster, deleter: Deleter, jobs: usize) -> Result<Reading> {
    let started = std::time::Instant::now();
    let running = deleters::start(cluster, deleter, None, metrics_port()?, Work::Tracking)?;
    let listed = deleter
        .is_kube_retention()
        .then(|| started.elapsed().as_secs_f64());
    // Listed (kube-retention's /readyz waited for that) and settled; the peer has no
    // readiness to wait for, so both get time in proportion to the Jobs to list.
    tokio::time::sleep(settle(jobs)).await;
    let (peak, current) = running.pid().and_then(rss_kib).context("deleter RSS")?;
    println!(
        "{}: {:.1} MiB RSS ({:.1} MiB peak) with {jobs} Jobs",
        deleter.label(),
        mib(current),
        mib(peak)
    );
    Ok(Reading {
        deleter,
        jobs,
        rss_kib: current,
        peak_kib: peak,
        listed,
    })
}

/// The `controller-memory` section.
pub fn section(readings: &[Reading]) -> String {
    let mut rows = Vec::new();
    for reading in readings {
        let previous = readings
            .iter()
            .filter(|earlier| earlier.deleter == reading.deleter && earlier.jobs < reading.jobs)
            .max_by_key(|earlier| earlier.jobs);
        let growth = previous.map_or("".to_owned(), |earlier| {
            let bytes = (reading.peak_kib as f64 - earlier.peak_kib as f64) * 1024.0;
            format!("{:.0}", bytes / (reading.jobs - earlier.jobs) as f64)
        });
        rows.push(format!(
            "| {} | {} | {:.1} | {:.1} | {growth} |",
            reading.deleter.label(),
            reading.jobs,
            mib(reading.rss_kib),
            mib(reading.peak_kib),
        ));
    }
    format!(
        "### Controller memory with many tracked objects\n\n\
         Measured with `make bench-controller` (`bench/src/memory.rs`; `--full` for 10k, 100k and\n\
         300k): unfinished Jobs (each with both deleters' settings) exist; each deleter starts fresh,\n\
         lists them and is read 20 s later, a second more per 10,000 Jobs (kube-retention after its\n\
         /readyz reported the list done). The peak (VmHWM) includes the listing. Goal: ≤ 64 MiB\n\
         at 100k, the listing peak included.\n\n\
         | deleter | Jobs | RSS (MiB) | peak RSS (MiB) | peak growth per Job since the size before (bytes) |\n\
         | --- | --- | --- | --- | --- |\n{}\n",
        rows.join("\n")
    )
}
