//! The deletion scenarios of `make bench-controller`: Jobs finishing steadily or all at once,
//! each scenario run once per deleter, fresh — kube-retention's controller, and
//! kube-controller-manager's ttl-after-finished controller with its default workers and, where
//! the workers are the bottleneck, tuned — timed from each Job's expiry to the watch event, with
//! requests counted from the audit log.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;
use serde_json::Value;

use crate::deleters::{self, Deleter};
use crate::{jobs, metrics_port, mib, namespace, report, rss_kib};

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
    peak_rss_kib: u64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn now_second() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

async fn sleep_until(at: Timestamp) {
    if let Ok(wait) = Duration::try_from(at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
}

/// Waits until the deleter's Events stop coming (none for 3 s; a minute at most): Events yield
/// to deletions and an aggregated one waits for its window, so counting at the last deletion
/// would miss them.
async fn settle_events(cluster: &LocalCluster, offset: usize, user: &str, ns: &str) -> Result<()> {
    let events = || -> Result<usize> {
        let requests = audited(cluster, offset, user, ns)?;
        Ok(requests.get("create events").copied().unwrap_or(0))
    };
    let (mut last, mut quiet, started) = (events()?, 0, std::time::Instant::now());
    while quiet < 3 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = events()?;
        quiet = if now == last { quiet + 1 } else { 0 };
        last = now;
    }
    Ok(())
}

/// Requests by `user` in `namespace` recorded after `offset` bytes of the audit log, by verb.
fn audited(
    cluster: &LocalCluster,
    offset: usize,
    user: &str,
    namespace: &str,
) -> Result<std::collections::BTreeMap<String, usize>> {
    let log = std::fs::read(cluster.layout.state("logs/audit.log"))?;
    let mut counts = std::collections::BTreeMap::new();
    for line in log[offset.min(log.len())..].split(|byte| *byte == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] == user && event["objectRef"]["namespace"] == namespace {
            let resource = event["objectRef"]["resource"].as_str().unwrap_or_default();
            let verb = event["verb"].as_str().unwrap_or_default();
            *counts.entry(format!("{verb} {resource}")).or_default() += 1;
        }
    }
    Ok(counts)
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
    let running = deleters::start(cluster, deleter, scenario.budget, metrics_port()?)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ttl = match scenario.shape {
        Shape::Burst { ttl } | Shape::Steady { ttl, .. } => ttl,
    };
    jobs::create(client, &ns, scenario.jobs, ttl).await?;
    let (deletions, watch) = jobs::watch_deletions(client, &ns);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let offset = std::fs::metadata(cluster.layout.state("logs/audit.log"))
        .map_or(0, |meta| meta.len() as usize);
    let mut expiries = vec![Timestamp::now(); scenario.jobs];
    match scenario.shape {
        Shape::Burst { ttl } => {
            let at = now_second();
            jobs::finish(client, &ns, 0..scenario.jobs, at).await?;
            let expiry = at + SignedDuration::from_secs(ttl.into());
            if Timestamp::now() > expiry {
                bail!(
                    "finishing {} Jobs took past their expiry: raise the TTL",
                    scenario.jobs
                );
            }
            expiries.fill(expiry);
        }
        Shape::Steady { rate, seconds, ttl } => {
            for second in 0..seconds {
                let at = now_second() + SignedDuration::from_secs(1);
                sleep_until(at).await;
                let batch = second * rate..((second + 1) * rate).min(scenario.jobs);
                jobs::finish(client, &ns, batch.clone(), at).await?;
                for index in batch {
                    expiries[index] = at + SignedDuration::from_secs(ttl.into());
                }
            }
        }
    }
    let limit = Duration::from_secs(120 + scenario.jobs as u64 / 2);
    let started = std::time::Instant::now();
    while jobs::deleted(&deletions) < scenario.jobs {
        if started.elapsed() > limit {
            bail!(
                "{} of {} Jobs deleted after {limit:?}",
                jobs::deleted(&deletions),
                scenario.jobs
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    watch.abort();
    settle_events(cluster, offset, &deleter.user(), &ns).await?;
    let peak_rss_kib = running.pid().and_then(rss_kib).map_or(0, |(peak, _)| peak);
    drop(running);
    tokio::time::sleep(Duration::from_secs(1)).await;
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
        requests: audited(cluster, offset, &deleter.user(), &ns)?,
        delays,
        peak_rss_kib,
    })
}

fn budget_text(budget: Option<u32>) -> String {
    budget.map_or("unlimited".to_owned(), |budget| format!("{budget} req/s"))
}

pub fn row_text(row: &Row) -> String {
    let per = |key: &str| row.requests.get(key).copied().unwrap_or(0) as f64 / row.jobs as f64;
    let total: usize = row.requests.values().sum();
    format!(
        "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |",
        row.scenario,
        row.deleter.label(),
        row.jobs,
        budget_text(row.budget),
        percentile(&row.delays, 50.0),
        percentile(&row.delays, 99.0),
        row.delays.last().copied().unwrap_or(f64::NAN),
        row.rate,
        total as f64 / row.jobs as f64,
        per("delete jobs"),
        per("get jobs"),
        per("patch jobs"),
        per("create events"),
        mib(row.peak_rss_kib),
    )
}

/// Where the section goes and what it states as its goal.
pub struct Report<'a> {
    pub file: &'a std::path::Path,
    pub root: &'a std::path::Path,
    pub steady_rate: usize,
}

/// Runs every scenario with each of its deleters and writes the `controller` section.
pub async fn run(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
    target: &Report<'_>,
) -> Result<()> {
    let mut rows = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        for &deleter in &scenario.deleters {
            println!(
                "{}: {} ({} Jobs, {})",
                scenario.name,
                deleter.label(),
                scenario.jobs,
                budget_text(scenario.budget)
            );
            let row = run_scenario(cluster, client, index, scenario, deleter).await?;
            println!("{}", row_text(&row));
            rows.push(row);
        }
    }
    let mut ratios = Vec::new();
    for scenario in scenarios {
        let of = |row: &&Row| row.scenario == scenario.name;
        let ours = rows
            .iter()
            .filter(of)
            .find(|row| row.deleter == Deleter::KubeRetention);
        let best_peer = rows
            .iter()
            .filter(of)
            .filter(|row| matches!(row.deleter, Deleter::Peer | Deleter::PeerTuned))
            .max_by(|a, b| a.rate.total_cmp(&b.rate));
        if let (Some(ours), Some(peer)) = (ours, best_peer) {
            ratios.push(format!(
                "{}: {:.2}× (against {})",
                scenario.name,
                ours.rate / peer.rate,
                peer.deleter.label()
            ));
        }
    }
    let body = format!(
        "## Controller: kube-retention against kube-controller-manager's TTL controller\n\n\
         Measured with `make bench-controller` (`bench/src/bin/controller-bench.rs`) on a private local\n\
         cluster (Kubernetes {version}, this machine's {cpus} cores shared by everything). Each row starts\n\
         its deleter fresh: kube-retention's release controller (`--qps` = the budget, 0 when unlimited)\n\
         or `kube-controller-manager --controllers=ttl-after-finished-controller` with `--kube-api-qps`\n\
         and `--kube-api-burst` = the budget, with its default 5 workers and, in the unlimited burst\n\
         where its workers are the bottleneck, also with `--concurrent-ttl-after-finished-syncs=50`.\n\
         In that burst kube-retention also runs with `--event-window=0s` (one Event per deletion, as\n\
         before Events were aggregated per parent, or per kind in a namespace, over 5 s).\n\
         In that burst kube-retention also runs with `--event-window=0s` (one Event per deletion, as\n\
         before Events were aggregated per parent, or per kind in a namespace, over 5 s). Every Job carries both `retention.dev/ttl-after-finished`\n\
         and `ttlSecondsAfterFinished`; the benchmark finishes Jobs through the status subresource and\n\
         times each deletion from its expiry to the watch event. Requests are counted per client from\n\
         the API server's audit log (`bench/audit-policy.yaml`); kube-retention's include its\n\
         `expires-at` stamps (PATCH) and Events, which it sends only with budget the deletions leave;\n\
         each run waits for its deleter's Events to stop (3 s without one) before counting.\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion | DELETE | GET | PATCH | Event | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{}\n\n\
         Deletions per second, kube-retention ÷ the better peer: {}.\n\n\
         Goals: delay p99 ≤ 1 s at {} expiries/s, one request per deletion, ≥ 1.9× the peer's deletions\n\
         per second at equal budget.\n",
        rows.iter().map(row_text).collect::<Vec<_>>().join("\n"),
        ratios.join(", "),
        target.steady_rate,
        version = std::fs::read_to_string(target.root.join("tests/cluster/go.mod"))?
            .lines()
            .find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes "))
            .unwrap_or("?")
            .trim(),
        cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
    );
    report::write_section(target.file, "controller", &body)?;
    println!("written to {}", target.file.display());
    Ok(())
}
