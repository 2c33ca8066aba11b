//! One deletion run: a scenario's Jobs created, finished in its shape, and deleted by one
//! deleter started fresh, each deletion timed from the Job's expiry to the watch event, the
//! deleter's requests counted from the audit log and, over a burst, the CPU it and the control
//! plane used.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;

use super::audit::{audit, settle_events};
use super::{Cpu, Row};
use crate::deleters::{self, Deleter, Work};
use crate::ledger_sink::LedgerSink;
use crate::{jobs, kyverno, metrics_port, namespace, now_second, rss_kib, sleep_until};

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

pub(super) async fn run(
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
    tokio::time::sleep(deleter.settle()).await;
    let ttl = match scenario.shape {
        Shape::Burst { ttl } | Shape::Steady { ttl, .. } => ttl,
    };
    let policy = deleter.deleting_policy(cluster, &ns, ttl)?;
    jobs::create(client, &ns, scenario.jobs, ttl).await?;
    let (deletions, watch) = jobs::watch_deletions(client, &ns).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let offset =
        std::fs::metadata(cluster.layout.audit_log()).map_or(0, |meta| meta.len() as usize);
    let mut expiries = vec![Timestamp::now(); scenario.jobs];
    // Kyverno's TTL label is written as the Jobs finish, each through its webhook.
    let ttl = match (deleter, &scenario.shape) {
        (Deleter::KyvernoTtl, Shape::Burst { .. }) => {
            ttl.max(kyverno::labelling_time(scenario.jobs, scenario.budget))
        }
        _ => ttl,
    };
    match scenario.shape {
        Shape::Burst { .. } => {
            let at = now_second();
            let expiry = finish(client, &ns, deleter, 0..scenario.jobs, at, ttl).await?;
            println!(
                "finished{} {} Jobs in {:.1} s",
                if deleter == Deleter::KyvernoTtl {
                    " and labelled"
                } else {
                    ""
                },
                scenario.jobs,
                Timestamp::now().duration_since(at).as_secs_f64()
            );
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
        Shape::Steady { rate, seconds, .. } => {
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
    if let Some(policy) = policy {
        policy.remove()?;
    }
    let cpu = cpu_before.and_then(|before| Some(Cpu::read(cluster, pid())?.since(before)));
    watch.abort();
    if deleter.records_events() {
        settle_events(cluster, offset, &deleter.user(), &ns).await?;
    }
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
        ttl,
        rate: scenario.jobs as f64 / span,
        requests: audited.in_namespace,
        all_requests: audited.everywhere,
        delays,
        peak_rss_kib,
        announced: sink.as_ref().map(LedgerSink::announced),
        cpu,
    })
}
