//! `make bench-controller`: kube-retention's controller against kube-controller-manager's
//! ttl-after-finished controller, side by side in one run on a private local cluster, at the same
//! client request budget. Deletion delay p50/p99/max, deletions per second, API requests per
//! deletion (from the audit log), peak RSS; then steady-state memory with many tracked Jobs.
//! Results go into docs/benchmarks.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use jiff::{SignedDuration, Timestamp};
use kube_retention_bench::deleters::{self, Deleter};
use kube_retention_bench::{discovery, jobs, namespace, policies, report, rss_kib};
use kube_retention_e2e::components::CONTROLLER;
use kube_retention_e2e::process::tracked;
use kube_retention_e2e::{Layout, LocalCluster};
use serde_json::Value;

#[derive(Parser)]
struct Args {
    /// Jobs finishing together under the request budget.
    #[arg(long, default_value_t = 1_000)]
    budgeted_burst: usize,
    /// Jobs finishing together without a budget.
    #[arg(long, default_value_t = 10_000)]
    unlimited_burst: usize,
    /// The shared client request budget, requests per second.
    #[arg(long, default_value_t = 20)]
    budget: u32,
    /// Seconds of steady expiries.
    #[arg(long, default_value_t = 30)]
    steady_seconds: usize,
    /// Expiries per second in the steady scenario.
    #[arg(long, default_value_t = 20)]
    steady_rate: usize,
    /// Request budget of the steady scenario: kube-retention's default.
    #[arg(long, default_value_t = 50)]
    steady_budget: u32,
    /// Jobs tracked for the steady-state memory figure.
    #[arg(long, default_value_t = 100_000)]
    tracked: usize,
    #[arg(long, default_value = "docs/benchmarks.md")]
    report: PathBuf,
    /// Jobs the webhook never saw, for the cost of finding them.
    #[arg(long, default_value_t = 10_000)]
    unlabelled: usize,
    /// Objects under one ClusterRetentionPolicy, for its memory and the cost of changing it.
    #[arg(long, default_value_t = 100_000)]
    policy_objects: usize,
    /// The kinds those objects are spread over.
    #[arg(long, default_value_t = 10)]
    policy_kinds: usize,
    /// Run only the deletion scenarios, the memory figure, the cost of finding unlabelled Jobs,
    /// or policies at scale.
    #[arg(long, value_enum)]
    only: Option<Part>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Deletion,
    Memory,
    Discovery,
    Policies,
}

enum Shape {
    /// All finish in the same second.
    Burst { ttl: u32 },
    /// `rate` finish every second for `seconds` seconds.
    Steady {
        rate: usize,
        seconds: usize,
        ttl: u32,
    },
}

struct Scenario {
    name: String,
    jobs: usize,
    budget: Option<u32>,
    shape: Shape,
}

struct Row {
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

fn metrics_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
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
    let ns = format!(
        "bench-{index}-{}",
        if deleter == Deleter::KubeRetention {
            "kr"
        } else {
            "peer"
        }
    );
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

/// Steady-state RSS of each deleter with `count` unfinished Jobs to track.
async fn memory(
    cluster: &LocalCluster,
    client: &kube::Client,
    count: usize,
) -> Result<Vec<(Deleter, u64, u64)>> {
    namespace(client, "bench-memory").await?;
    println!("creating {count} Jobs to track");
    jobs::create(client, "bench-memory", count, 86_400).await?;
    let mut figures = Vec::new();
    for deleter in [Deleter::KubeRetention, Deleter::Peer] {
        let running = deleters::start(cluster, deleter, None, metrics_port()?)?;
        // Listed (the controller's /readyz waited for that) and settled.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let (peak, current) = running.pid().and_then(rss_kib).context("deleter RSS")?;
        println!(
            "{}: {:.1} MiB RSS ({:.1} MiB peak) with {count} Jobs",
            deleter.label(),
            current as f64 / 1024.0,
            peak as f64 / 1024.0
        );
        figures.push((deleter, current, peak));
    }
    Ok(figures)
}

fn policies_text(figures: &policies::Figures) -> String {
    let requests: Vec<String> = figures
        .change_requests
        .iter()
        .map(|(request, count)| format!("{count} {request}"))
        .collect();
    format!(
        "### Policies at scale, and what changing one costs\n\n\
         Measured with `make bench-controller` (`bench/src/policies.rs`): {} custom objects, no\n\
         annotations, unfinished, spread over {} kinds defined for the run, under one\n\
         ClusterRetentionPolicy naming every kind. kube-retention's release controller starts fresh\n\
         (it watches every object of a policy's kinds); the time runs until the policy's status counts\n\
         every object (statuses are written every 5 s). RSS is read 10 s later; the peak includes the\n\
         listing. Then the policy's TTL changes: every kind is listed afresh and each object judged\n\
         again, until the status shows the new generation governing all of them. Goal: ≤ 64 MiB\n\
         including the listing peak.\n\n\
         | objects | kinds | governing all after start | RSS (MiB) | peak RSS (MiB) | change: governing all again after | change: controller requests |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n\
         | {} | {} | {:.1} s | {:.1} | {:.1} | {:.1} s | {} |\n",
        figures.objects,
        figures.kinds,
        figures.objects,
        figures.kinds,
        figures.governing_after.as_secs_f64(),
        figures.rss_kib as f64 / 1024.0,
        figures.peak_rss_kib as f64 / 1024.0,
        figures.change_after.as_secs_f64(),
        requests.join(", "),
    )
}

fn discovery_text(figures: &discovery::Figures) -> String {
    let per = |bytes: usize| bytes as f64 / figures.objects as f64;
    let at_100k = |bytes: usize| per(bytes) * 100_000.0 / 1024.0 / 1024.0;
    format!(
        "### Finding objects the webhook never saw\n\n\
         Measured with `make bench-controller` (`bench/src/discovery.rs`): {n} Jobs with a\n\
         `retention.dev/ttl-after-finished` annotation are created while the webhook is stopped, so\n\
         none is labelled `retention.dev/managed`; then kube-retention's release controller starts\n\
         fresh (50 req/s budget). Besides its labelled watch it runs a metadata-only watch of Jobs and\n\
         Pods with no selector, remembers only annotated, unlabelled objects, and labels each once,\n\
         within the request budget (so many stragglers are labelled at the budget's pace).\n\n\
         | Jobs | all labelled after start | LIST requests for Jobs (pages) | PATCHes | metadata LIST | whole-object LIST |\n\
         | --- | --- | --- | --- | --- | --- |\n\
         | {n} | {labelled:.1} s | {lists} | {patches} | {meta:.1} MiB ({meta_per:.0} B/object, {meta_s:.1} s) | {full:.1} MiB ({full_per:.0} B/object) |\n\n\
         API cost at 100,000 objects of a kind, from these per-object figures: at start one paged\n\
         metadata LIST of about {meta_100k:.0} MiB (200 pages of 500) beside the labelled LIST — a\n\
         whole-object LIST of every object would be {full_100k:.0} MiB; then one metadata-only watch\n\
         (one event per change of any object of the kind, metadata only); one PATCH per unlabelled\n\
         object with retention settings, once; nothing per unannotated object. The controller's\n\
         memory holds only the unlabelled ones until labelled.\n",
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

fn budget_text(budget: Option<u32>) -> String {
    budget.map_or("unlimited".to_owned(), |budget| format!("{budget} req/s"))
}

fn row_text(row: &Row) -> String {
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
        row.peak_rss_kib as f64 / 1024.0,
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // `make bench-controller` sets KUBE_RETENTION_PROFILE=release and the audit policy.
    let state = tempfile::Builder::new()
        .prefix("kube-retention-bench-")
        .tempdir()?;
    let layout = Layout::new(state.path())?;
    println!("starting a private cluster in {}", state.path().display());
    let (cluster, _) = LocalCluster::up(layout)?;
    let outcome = bench(&args, &cluster, &root).await;
    LocalCluster::down(&cluster.layout)?;
    outcome
}

async fn bench(args: &Args, cluster: &LocalCluster, root: &std::path::Path) -> Result<()> {
    tracked(&cluster.layout.state_dir, &[CONTROLLER])
        .remove(0)
        .stop(Duration::from_secs(10))?;
    deleters::write_peer_kubeconfig(cluster)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.layout.kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let scenarios = [
        Scenario {
            name: format!("steady {} expiries/s", args.steady_rate),
            jobs: args.steady_rate * args.steady_seconds,
            budget: Some(args.steady_budget),
            shape: Shape::Steady {
                rate: args.steady_rate,
                seconds: args.steady_seconds,
                ttl: 30,
            },
        },
        Scenario {
            name: "burst, budgeted".into(),
            jobs: args.budgeted_burst,
            budget: Some(args.budget),
            shape: Shape::Burst { ttl: 30 },
        },
        Scenario {
            name: "burst, unlimited".into(),
            jobs: args.unlimited_burst,
            budget: None,
            shape: Shape::Burst { ttl: 60 },
        },
    ];
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    if runs(Part::Deletion) {
        deletion(args, cluster, &client, root, &scenarios).await?;
    }
    if runs(Part::Discovery) {
        let figures =
            discovery::measure(cluster, &client, args.unlabelled, metrics_port()?).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-discovery",
            &discovery_text(&figures),
        )?;
    }
    if runs(Part::Policies) {
        let figures = policies::measure(
            cluster,
            &client,
            args.policy_objects,
            args.policy_kinds,
            metrics_port()?,
        )
        .await?;
        report::write_section(
            &root.join(&args.report),
            "controller-policies",
            &policies_text(&figures),
        )?;
    }
    if runs(Part::Memory) {
        let figures = memory(cluster, &client, args.tracked).await?;
        let lines: Vec<String> = figures
            .iter()
            .map(|(deleter, current, peak)| {
                format!(
                    "| {} | {} | {:.1} | {:.1} |",
                    deleter.label(),
                    args.tracked,
                    *current as f64 / 1024.0,
                    *peak as f64 / 1024.0
                )
            })
            .collect();
        let body = format!(
            "### Controller memory with many tracked objects\n\n\
             Measured with `make bench-controller`: {} unfinished Jobs (each with both deleters' settings)\n\
             exist; each deleter starts fresh, lists them and is read 20 s later. Goal: ≤ 64 MiB at 100k.\n\n\
             | deleter | Jobs | RSS (MiB) | peak RSS (MiB) |\n| --- | --- | --- | --- |\n{}\n",
            args.tracked,
            lines.join("\n"),
        );
        report::write_section(&root.join(&args.report), "controller-memory", &body)?;
    }
    Ok(())
}

async fn deletion(
    args: &Args,
    cluster: &LocalCluster,
    client: &kube::Client,
    root: &std::path::Path,
    scenarios: &[Scenario],
) -> Result<()> {
    let mut rows = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        for deleter in [Deleter::KubeRetention, Deleter::Peer] {
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
    for pair in rows.chunks(2) {
        if let [ours, peer] = pair {
            ratios.push(format!("{}: {:.2}×", ours.scenario, ours.rate / peer.rate));
        }
    }
    let body = format!(
        "## Controller: kube-retention against kube-controller-manager's TTL controller\n\n\
         Measured with `make bench-controller` (`bench/src/bin/controller-bench.rs`) on a private local\n\
         cluster (Kubernetes {version}, this machine's {cpus} cores shared by everything). Each row starts\n\
         its deleter fresh: kube-retention's release controller (`--qps` = the budget, 0 when unlimited)\n\
         or `kube-controller-manager --controllers=ttl-after-finished-controller` with `--kube-api-qps`\n\
         and `--kube-api-burst` = the budget. Every Job carries both `retention.dev/ttl-after-finished`\n\
         and `ttlSecondsAfterFinished`; the benchmark finishes Jobs through the status subresource and\n\
         times each deletion from its expiry to the watch event. Requests are counted per client from\n\
         the API server's audit log (`bench/audit-policy.yaml`); kube-retention's include its\n\
         `expires-at` stamps (PATCH) and Events, which it sends only with budget the deletions leave.\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion | DELETE | GET | PATCH | Event | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{}\n\n\
         Deletions per second, kube-retention ÷ peer: {}.\n\n\
         Goals: delay p99 ≤ 1 s at {} expiries/s, one request per deletion, ≥ 1.9× the peer's deletions\n\
         per second at equal budget.\n",
        rows.iter().map(row_text).collect::<Vec<_>>().join("\n"),
        ratios.join(", "),
        args.steady_rate,
        version = std::fs::read_to_string(root.join("tests/cluster/go.mod"))?
            .lines()
            .find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes "))
            .unwrap_or("?")
            .trim(),
        cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
    );
    report::write_section(&root.join(&args.report), "controller", &body)?;
    println!("written to {}", args.report.display());
    Ok(())
}
