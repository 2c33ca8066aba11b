//! The idle part of `make bench-peers`: many Jobs that none of the deleters will delete for a
//! day, each deleter started fresh against them, and what it holds and asks for while nothing
//! is due — its memory once it has found them (and its peak, the listing included) and its
//! requests in the next minute, from the audit log. Each deleter is told in its own way that
//! the Jobs live a day: kube-retention's annotation, Kyverno's `cleanup.kyverno.io/ttl` label a
//! day ahead, or a DeletingPolicy that holds the namespace's Jobs to a day (it lists them all
//! at each run).

use std::time::Duration;

use anyhow::{Context, Result};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;

use crate::deleters::{self, Deleter, Work};
use crate::{jobs, metrics_port, mib, namespace, rss_kib};

const NAMESPACE: &str = "bench-idle";
/// A day: nothing is due while measured.
const TTL_SECONDS: u32 = 86_400;
/// The least time from a deleter's start to the counted minute ([`settle`]).
const SETTLE: Duration = Duration::from_secs(5);
/// The window whose requests are counted.
const WINDOW: Duration = Duration::from_secs(60);

/// One deleter's reading at one size.
pub struct Reading {
    pub deleter: Deleter,
    pub jobs: usize,
    pub rss_kib: u64,
    pub peak_kib: u64,
    /// Its requests in the minute counted, any namespace or none.
    pub requests_per_minute: usize,
}

/// Time to settle before the counted minute: each deleter's start waited until it had listed
/// (kube-retention's readiness; for Kyverno's TTL label, its TTL manager watching Jobs), so
/// 5 s, and a second more per 10,000 Jobs for what follows a list. A DeletingPolicy lists at
/// its schedule, which the counted minute holds once.
fn settle(jobs: usize) -> Duration {
    SETTLE + Duration::from_secs(u64::try_from(jobs / 10_000).unwrap_or(u64::MAX))
}

/// Readings at each of `sizes`, each of `deleters` at each. Each size has a namespace of its
/// own, so that what one deleter's setting adds to the Jobs weighs on no other: the Jobs are
/// labelled for Kyverno's TTL only once the others are read, and the DeletingPolicy exists only
/// while Kyverno runs for it.
pub async fn measure(
    cluster: &LocalCluster,
    client: &kube::Client,
    sizes: &[usize],
    deleters: &[Deleter],
) -> Result<Vec<Reading>> {
    let (labelled, plain): (Vec<Deleter>, Vec<Deleter>) = deleters
        .iter()
        .partition(|deleter| **deleter == Deleter::KyvernoTtl);
    let mut readings = Vec::new();
    for &size in sizes {
        let ns = format!("{NAMESPACE}-{size}");
        namespace(client, &ns).await?;
        println!("creating {size} Jobs for the idle deleters");
        jobs::create_range(client, &ns, 0..size, TTL_SECONDS).await?;
        for &deleter in &plain {
            readings.push(read(cluster, deleter, &ns, size).await?);
        }
        if !labelled.is_empty() {
            let expiry = Timestamp::now() + SignedDuration::from_secs(TTL_SECONDS.into());
            jobs::label_expiry(client, &ns, 0..size, expiry).await?;
        }
        for &deleter in &labelled {
            readings.push(read(cluster, deleter, &ns, size).await?);
        }
        crate::remove_namespace(cluster, &ns)?;
    }
    Ok(readings)
}

/// `deleter` started fresh against the `jobs` Jobs of `ns`: its memory once settled, and its
/// requests in the minute after.
async fn read(cluster: &LocalCluster, deleter: Deleter, ns: &str, jobs: usize) -> Result<Reading> {
    let policy = deleter.deleting_policy(cluster, ns, TTL_SECONDS)?;
    let running = deleters::start(cluster, deleter, None, metrics_port()?, Work::Tracking)?;
    tokio::time::sleep(settle(jobs)).await;
    let offset = std::fs::metadata(cluster.layout.audit_log()).map_or(0, |meta| meta.len());
    tokio::time::sleep(WINDOW).await;
    let requests_per_minute =
        crate::deletion::audit(cluster, offset as usize, &deleter.user(), ns)?.everywhere;
    let (peak, current) = running.pid().and_then(rss_kib).context("deleter RSS")?;
    drop(running);
    if let Some(policy) = policy {
        policy.remove()?;
    }
    println!(
        "{}: {:.1} MiB RSS ({:.1} MiB peak), {requests_per_minute} requests a minute, with {jobs} Jobs",
        deleter.label(),
        mib(current),
        mib(peak)
    );
    Ok(Reading {
        deleter,
        jobs,
        rss_kib: current,
        peak_kib: peak,
        requests_per_minute,
    })
}

/// The `peers-idle` section; `command` is the one that ran it.
pub fn section(readings: &[Reading], command: &str) -> String {
    let rows: Vec<String> = readings
        .iter()
        .map(|reading| {
            format!(
                "| {} | {} | {:.1} | {:.1} | {} |",
                reading.deleter.label(),
                reading.jobs,
                mib(reading.rss_kib),
                mib(reading.peak_kib),
                reading.requests_per_minute,
            )
        })
        .collect();
    let verdicts = goals(readings);
    format!(
        "### Idle, with many objects\n\n\
         Measured with `{command}` (`bench/src/idle.rs`):\n\
         Jobs none of the deleters deletes for a day exist, a namespace of them per size; each\n\
         deleter is told so its own way (kube-retention's annotation; Kyverno's TTL label a day\n\
         ahead, added only once the others are read; a DeletingPolicy that holds them to a day,\n\
         there only while Kyverno runs for it). Each deleter starts fresh with no request budget and\n\
         finds them (kube-retention until it is ready; Kyverno's TTL label until its metrics say\n\
         it watches Jobs); {settle} s later, a second more per 10,000 Jobs, its requests in the\n\
         next minute are counted from the audit log, in any namespace or none, and then its\n\
         memory is read. The peak (VmHWM) includes the listing; a\n\
         DeletingPolicy lists every matching Job at each run, once in the counted minute.\n\n\
         | deleter | Jobs | RSS (MiB) | peak RSS (MiB) | requests in a minute |\n\
         | --- | --- | --- | --- | --- |\n{}\n\n\
         Goals, kube-retention against each peer at the largest size: less memory (the peak) and\n\
         no more requests while idle.\n\n{}\n",
        rows.join("\n"),
        verdicts.join("\n"),
        settle = SETTLE.as_secs(),
    )
}

/// At the largest size, kube-retention's peak and idle requests against each peer's.
fn goals(readings: &[Reading]) -> Vec<String> {
    let Some(largest) = readings.iter().map(|reading| reading.jobs).max() else {
        return Vec::new();
    };
    let at = |reading: &&Reading| reading.jobs == largest;
    let Some(ours) = readings
        .iter()
        .filter(at)
        .find(|reading| reading.deleter == Deleter::KubeRetention)
    else {
        return Vec::new();
    };
    let verdict = |met: bool| if met { "met" } else { "not met" };
    let mut lines = Vec::new();
    for peer in readings
        .iter()
        .filter(at)
        .filter(|reading| reading.deleter != Deleter::KubeRetention)
    {
        lines.push(format!(
            "- {largest} Jobs, {}: less memory at its peak: **{}**; no more requests in a minute: **{}**",
            peer.deleter.label(),
            verdict(ours.peak_kib < peer.peak_kib),
            verdict(ours.requests_per_minute <= peer.requests_per_minute),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(deleter: Deleter, jobs: usize, peak_kib: u64, requests: usize) -> Reading {
        Reading {
            deleter,
            jobs,
            rss_kib: peak_kib,
            peak_kib,
            requests_per_minute: requests,
        }
    }

    #[test]
    fn the_goals_are_judged_at_the_largest_size_against_each_peer() {
        let readings = [
            reading(Deleter::KubeRetention, 10, 900, 0),
            reading(Deleter::KyvernoTtl, 10, 100, 0),
            reading(Deleter::KubeRetention, 100, 500, 3),
            reading(Deleter::KyvernoTtl, 100, 400, 10),
            reading(Deleter::KyvernoPolicy, 100, 800, 3),
        ];
        let lines = goals(&readings);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("- 100 Jobs, Kyverno, the cleanup.kyverno.io/ttl label"));
        assert!(lines[0].contains("less memory at its peak: **not met**"));
        assert!(lines[0].ends_with("no more requests in a minute: **met**"));
        assert!(lines[1].contains("less memory at its peak: **met**"));
        assert!(
            lines[1].ends_with("no more requests in a minute: **met**"),
            "equal is no more"
        );
    }
}
