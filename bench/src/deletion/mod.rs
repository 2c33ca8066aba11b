//! The deletion scenarios of `make bench-controller`: Jobs finishing steadily or all at once,
//! each scenario run once per deleter, fresh — kube-retention's controller, and
//! kube-controller-manager's ttl-after-finished controller and garbage collector (which finishes
//! its foreground deletions) with their default workers and, in the unlimited burst, with more —
//! timed from each Job's expiry to the watch event, with requests counted from the audit log.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;

use crate::deleters::{self, Deleter, Work};
use crate::ledger_sink::LedgerSink;
use crate::{jobs, kyverno, metrics_port, namespace, report, rss_kib};

mod audit;
mod cpu;
mod peers;
mod table;

use audit::settle_events;
pub use audit::{Audited, audit};
pub use cpu::Cpu;

#[derive(Clone)]
pub enum Shape {
    /// All finish in the same second.
    Burst { ttl: u32 },
    /// `rate` finish every second for `seconds` seconds.
    Steady {
        rate: usize,
        seconds: usize,
        ttl: u32,
    },
}

#[derive(Clone)]
pub struct Scenario {
    pub name: String,
    pub jobs: usize,
    pub budget: Option<u32>,
    pub shape: Shape,
    /// Who deletes, each in a run of its own.
    pub deleters: Vec<Deleter>,
}

pub struct Row {
    scenario: String,
    deleter: Deleter,
    jobs: usize,
    budget: Option<u32>,
    delays: Vec<f64>,
    rate: f64,
    requests: std::collections::BTreeMap<String, usize>,
    /// Every request of the deleter's from the first finish to the last deletion, in any
    /// namespace or none.
    all_requests: usize,
    peak_rss_kib: u64,
    /// Deletions the ledger's sink acknowledged (`--ledger-sink` runs only).
    announced: Option<usize>,
    /// Where the CPU went from a burst's expiry to its last deletion (bursts only).
    cpu: Option<Cpu>,
}

fn now_second() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

async fn sleep_until(at: Timestamp) {
    if let Ok(wait) = Duration::try_from(at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
}

/// Finishes the Jobs `batch` at `at` and returns when they expire, `ttl` seconds later; for
/// Kyverno's TTL label, labels them with that time too.
async fn finish(
    client: &kube::Client,
    ns: &str,
    deleter: Deleter,
    batch: std::ops::Range<usize>,
    at: Timestamp,
    ttl: u32,
) -> Result<Timestamp> {
    jobs::finish(client, ns, batch.clone(), at).await?;
    let expiry = at + SignedDuration::from_secs(ttl.into());
    if deleter == Deleter::KyvernoTtl {
        jobs::label_expiry(client, ns, batch, expiry).await?;
    }
    Ok(expiry)
}

async fn run_scenario(
    cluster: &LocalCluster,
    client: &kube::Client,
    index: usize,
    scenario: &Scenario,
    deleter: Deleter,
) -> Result<Row> {
    let ns = format!("bench-{index}-{}", deleter.slug());
    namespace(client, &ns).await?;
    let sink = match deleter {
        Deleter::KubeRetentionLedger => Some(LedgerSink::start().await?),
        _ => None,
    };
    // The ceiling starts once the Jobs have finished, knowing when they expire.
    let mut running = match deleter {
        Deleter::Ceiling => None,
        _ => Some(deleters::start_with(
            cluster,
            deleter,
            scenario.budget,
            metrics_port()?,
            Work::Deleting,
            &sink.as_ref().map(LedgerSink::flags).unwrap_or_default(),
        )?),
    };
    // kube-retention's start waited until it had listed; the peer gets time for its informers
    // and its garbage collector's graph to sync.
    // Kyverno looks for labelled kinds one interval after it leads, and again each interval.
    let settle = match deleter {
        Deleter::Peer | Deleter::PeerTuned => 10,
        Deleter::KyvernoTtl => kyverno::TTL_FIRST_LOOK.as_secs() + 3,
        _ => 3,
    };
    tokio::time::sleep(Duration::from_secs(settle)).await;
    let ttl = match scenario.shape {
        Shape::Burst { ttl } | Shape::Steady { ttl, .. } => ttl,
    };
    if deleter == Deleter::KyvernoPolicy {
        kyverno::apply(cluster, &kyverno::deleting_policy(&ns, ttl))?;
    }
    jobs::create(client, &ns, scenario.jobs, ttl).await?;
    let (deletions, watch) = jobs::watch_deletions(client, &ns).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let offset =
        std::fs::metadata(cluster.layout.audit_log()).map_or(0, |meta| meta.len() as usize);
    let mut expiries = vec![Timestamp::now(); scenario.jobs];
    match scenario.shape {
        Shape::Burst { ttl } => {
            let at = now_second();
            let expiry = finish(client, &ns, deleter, 0..scenario.jobs, at, ttl).await?;
            if Timestamp::now() > expiry {
                bail!(
                    "finishing {} Jobs took past their expiry: raise the TTL",
                    scenario.jobs
                );
            }
            expiries.fill(expiry);
            if deleter == Deleter::Ceiling {
                running = Some(deleters::start_ceiling(cluster, &ns, expiry)?);
            }
        }
        Shape::Steady { .. } if deleter == Deleter::Ceiling => {
            bail!("the ceiling deletes a burst: it has no schedule to keep")
        }
        Shape::Steady { rate, seconds, ttl } => {
            for second in 0..seconds {
                let at = now_second() + SignedDuration::from_secs(1);
                sleep_until(at).await;
                let batch = second * rate..((second + 1) * rate).min(scenario.jobs);
                let expiry = finish(client, &ns, deleter, batch.clone(), at, ttl).await?;
                for index in batch {
                    expiries[index] = expiry;
                }
            }
        }
    }
    let limit = Duration::from_secs(120 + scenario.jobs as u64 / 2);
    let pid = || running.as_ref().and_then(deleters::Running::pid);
    let cpu_before = match scenario.shape {
        Shape::Burst { .. } => {
            sleep_until(expiries[0]).await;
            Cpu::read(cluster, pid())
        }
        Shape::Steady { .. } => None,
    };
    jobs::wait_deleted(&deletions, scenario.jobs, limit).await?;
    if deleter == Deleter::KyvernoPolicy {
        kyverno::delete_policy(cluster, &ns)?;
    }
    let cpu = cpu_before.and_then(|before| Some(Cpu::read(cluster, pid())?.since(before)));
    watch.abort();
    settle_events(cluster, offset, &deleter.user(), &ns).await?;
    // The ledger delivers beside the deletions: give it a moment to catch up.
    if let Some(sink) = &sink {
        let started = std::time::Instant::now();
        while sink.announced() < scenario.jobs && started.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let peak_rss_kib = pid().and_then(rss_kib).map_or(0, |(peak, _)| peak);
    drop(running);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let audited = audit(cluster, offset, &deleter.user(), &ns)?;
    let seen = deletions
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let mut delays: Vec<f64> = (0..scenario.jobs)
        .filter_map(|index| {
            Some(
                seen.get(&jobs::name(index))?
                    .duration_since(expiries[index])
                    .as_secs_f64(),
            )
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    let first_expiry = expiries.iter().min().copied().context("no Jobs")?;
    let last_deletion = seen.values().max().copied().context("no deletions")?;
    let span = last_deletion
        .duration_since(first_expiry)
        .as_secs_f64()
        .max(0.001);
    Ok(Row {
        scenario: scenario.name.clone(),
        deleter,
        jobs: scenario.jobs,
        budget: scenario.budget,
        rate: scenario.jobs as f64 / span,
        requests: audited.in_namespace,
        all_requests: audited.everywhere,
        delays,
        peak_rss_kib,
        announced: sink.as_ref().map(LedgerSink::announced),
        cpu,
    })
}

/// Where the section goes and what it states as its goal.
pub struct Report<'a> {
    pub file: &'a std::path::Path,
    pub steady_rate: usize,
}

/// Runs every scenario with each of its deleters and writes the `controller` section.
pub async fn run(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
    target: &Report<'_>,
) -> Result<()> {
    let rows = rows(cluster, client, scenarios).await?;
    let names: Vec<&str> = scenarios
        .iter()
        .map(|scenario| scenario.name.as_str())
        .collect();
    report::write_section(
        target.file,
        "controller",
        &table::section(&rows, &names, target, &cluster.layout.kubernetes_release()?)?,
    )?;
    println!("written to {}", target.file.display());
    Ok(())
}

/// Runs every scenario with each of its deleters and writes the `peers` section.
pub async fn run_peers(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
    file: &std::path::Path,
) -> Result<()> {
    let rows = rows(cluster, client, scenarios).await?;
    report::write_section(
        file,
        "peers",
        &peers::section(&rows, &cluster.layout.kubernetes_release()?)?,
    )?;
    println!("written to {}", file.display());
    Ok(())
}

/// Runs `scenario` with the ledger off and on (`--only ledger`) and writes the
/// `controller-ledger` section.
pub async fn run_ledger(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenario: Scenario,
    target: &Report<'_>,
) -> Result<()> {
    let rows = rows(cluster, client, std::slice::from_ref(&scenario)).await?;
    report::write_section(
        target.file,
        "controller-ledger",
        &table::ledger_section(&rows),
    )?;
    println!("written to {}", target.file.display());
    Ok(())
}

/// Runs `burst` (kube-retention, then the ceiling) `rounds` times (`--only ceiling`) and writes
/// the `envelope-ceiling` section: a ratio per round, as the pace varies from run to run here.
pub async fn run_ceiling(
    cluster: &LocalCluster,
    client: &kube::Client,
    burst: Scenario,
    rounds: usize,
    file: &std::path::Path,
) -> Result<()> {
    let scenarios: Vec<Scenario> = (1..=rounds)
        .map(|round| Scenario {
            name: format!("round {round}"),
            deleters: vec![Deleter::KubeRetention, Deleter::Ceiling],
            ..burst.clone()
        })
        .collect();
    let rows = rows(cluster, client, &scenarios).await?;
    let section = table::ceiling_section(&rows, &burst.name);
    report::write_section(file, "envelope-ceiling", &section)?;
    println!("written to {}", file.display());
    Ok(())
}

/// A row per scenario and deleter, each run fresh.
async fn rows(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        for &deleter in &scenario.deleters {
            println!(
                "{}: {} ({} Jobs, {})",
                scenario.name,
                deleter.label(),
                scenario.jobs,
                table::budget_text(scenario.budget)
            );
            let row = run_scenario(cluster, client, index, scenario, deleter).await?;
            println!("{}", table::row_text(&row));
            rows.push(row);
        }
    }
    Ok(rows)
}
