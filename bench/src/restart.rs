//! The restart part of `make bench-controller`: many Jobs tracked, some of them overdue, and
//! kube-retention's controller started cold against them, as after an upgrade or a crash. How
//! soon after its start the first overdue Job is gone (it deletes while the list is still under
//! way), when the list ends, and when the last overdue Job is gone, against the pace its request
//! budget allows (one request per deletion).

use std::time::Duration;

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;

use crate::deleters::{self, Deleter, Work};
use crate::{jobs, metrics_port, mib, namespace, rss_kib};

const NAMESPACE: &str = "bench-restart";
/// The overdue Jobs' TTL; they finished twice that long before the start ([`cold_start`]),
/// here and in the envelope at scale.
pub const TTL_SECONDS: u32 = 60;

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
    let limit = Duration::from_secs(120) + Duration::from_secs_f64(2.0 * size.at_budget_pace());
    let start = cold_start(
        cluster,
        client,
        NAMESPACE,
        size.overdue(),
        Deleter::KubeRetention,
        size.budget,
        limit,
    )
    .await?;
    crate::remove_namespace(cluster, NAMESPACE)?;
    let (Some(first_deletion), Some(last_deletion), Some(listed)) =
        (start.first_deletion, start.last_deletion, start.listed)
    else {
        anyhow::bail!("the restart deleted nothing");
    };
    anyhow::ensure!(
        start.deleted == size.due,
        "{} of {} overdue Jobs deleted within {limit:?}",
        start.deleted,
        size.due
    );
    Ok(Figures {
        first_deletion,
        listed,
        last_deletion,
        peak_rss_kib: start.peak_rss_kib,
        size,
    })
}

/// What a cold start against overdue Jobs showed, in seconds from the deleter's start.
pub struct ColdStart {
    pub first_deletion: Option<f64>,
    /// When kube-retention's /readyz first answered 200; the peer says nothing of it.
    pub listed: Option<f64>,
    pub last_deletion: Option<f64>,
    /// Of the overdue Jobs, those deleted within the limit.
    pub deleted: usize,
    /// The last reading while it ran (the peak is VmHWM, the listing included).
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
    /// If the deleter ended before the wait did (killed, crashed), when and why.
    pub ended: Option<Ended>,
}

/// A deleter's end during its cold start.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// Seconds from its start to the first time it was seen gone (read each second).
    pub after: f64,
    /// Whether the kernel's log says its OOM killer killed it.
    pub out_of_memory: bool,
    /// How it ended, as its parent (this benchmark) is told: an exit status or a signal.
    pub exit: Option<String>,
    /// The last line this process wrote to its log, which usually says why it stopped.
    pub last_words: Option<String>,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the process ended {:.0} s after its start", self.after)?;
        if self.out_of_memory {
            write!(f, ", killed by the kernel's OOM killer")?;
        }
        if let Some(exit) = &self.exit {
            write!(f, " ({exit})")?;
        }
        match &self.last_words {
            Some(line) => write!(f, "; its log ends: `{line}`"),
            None => write!(f, "; it wrote nothing to its log"),
        }
    }
}

/// How long a log line [`Ended`] quotes may be.
const QUOTED: usize = 300;

/// The last line of `log` with anything on it, at most [`QUOTED`] characters, backticks made
/// quotes (it is quoted in Markdown).
fn last_words(log: &str) -> Option<String> {
    let line = log.lines().rev().find(|line| !line.trim().is_empty())?;
    Some(
        line.trim()
            .chars()
            .take(QUOTED)
            .collect::<String>()
            .replace('`', "'"),
    )
}

/// Finishes the Jobs `overdue` of `namespace` twice their TTL ago, then starts `deleter` cold
/// with `budget` requests per second and waits up to `limit` for them to be deleted. The
/// deleter's memory is read at the end, before it is stopped.
pub async fn cold_start(
    cluster: &LocalCluster,
    client: &kube::Client,
    namespace: &str,
    overdue: impl Iterator<Item = usize>,
    deleter: Deleter,
    budget: u32,
    limit: Duration,
) -> Result<ColdStart> {
    let overdue: Vec<usize> = overdue.collect();
    let finished = Timestamp::now() - SignedDuration::from_secs(2 * i64::from(TTL_SECONDS));
    println!("finishing {} Jobs, overdue", overdue.len());
    jobs::finish(client, namespace, overdue.iter().copied(), finished).await?;
    let (deletions, watch) = jobs::watch_deletions(client, namespace).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("starting {} cold", deleter.label());
    let start = Timestamp::now();
    let running = deleters::start(
        cluster,
        deleter,
        Some(budget),
        metrics_port()?,
        Work::Deleting,
    )?;
    let listed = deleter
        .is_kube_retention()
        .then(|| since(start, Timestamp::now()));
    let pid = running.pid();
    let (outcome, rss, ended) = {
        let wait = jobs::wait_deleted(&deletions, overdue.len(), limit);
        tokio::pin!(wait);
        let mut each_second = tokio::time::interval(Duration::from_secs(1));
        let mut rss = pid.and_then(rss_kib);
        loop {
            tokio::select! {
                // A reading at the end, as before the sampling; the last sample if it is gone.
                outcome = &mut wait => break (outcome, running.pid().and_then(rss_kib).or(rss), None),
                _ = each_second.tick() => match running.pid().and_then(rss_kib) {
                    Some(reading) => rss = Some(reading),
                    // Gone: nothing more will be deleted, and why is the finding.
                    None => break (Ok(()), rss, Some(Ended {
                        after: since(start, Timestamp::now()),
                        out_of_memory: pid.is_some_and(crate::killed_for_memory),
                        exit: pid.and_then(crate::exit_status),
                        last_words: last_words(&running.own_log()),
                    })),
                },
            }
        }
    };
    watch.abort();
    if let Err(error) = outcome {
        println!("{}: {error:#}", deleter.label());
    }
    if let Some(ended) = &ended {
        println!("{}: {ended}", deleter.label());
    }
    drop(running);
    let seen: Vec<Timestamp> = deletions
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .values()
        .copied()
        .collect();
    Ok(ColdStart {
        first_deletion: seen.iter().min().map(|at| since(start, *at)),
        listed,
        last_deletion: seen.iter().max().map(|at| since(start, *at)),
        deleted: seen.len(),
        peak_rss_kib: rss.map_or(0, |(peak, _)| peak),
        rss_kib: rss.map_or(0, |(_, current)| current),
        ended,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_words_are_the_last_line_with_anything_on_it_quoted_safely() {
        let log = "I1126 starting\nF1126 failed: `--x` is not a flag\n\n  \n";
        assert_eq!(
            last_words(log).as_deref(),
            Some("F1126 failed: '--x' is not a flag")
        );
        assert_eq!(
            last_words(&"x".repeat(1000)).map(|line| line.len()),
            Some(QUOTED)
        );
        assert_eq!(last_words("\n \n"), None);
    }
}
