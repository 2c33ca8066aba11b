//! `make bench-controller`: kube-retention's controller against kube-controller-manager's
//! ttl-after-finished controller, side by side in one run on a private local cluster, at the same
//! client request budget. Deletion delay p50/p99/max, deletions per second, API requests per
//! deletion (from the audit log), peak RSS ([`deletion`]); the cost of finding objects the webhook
//! never saw; policies at scale; then memory with many tracked Jobs ([`memory`]). Results go into
//! docs/benchmarks.md. The default takes about ten minutes; `--full` is the long form.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use kube_retention_bench::deleters::{self, Deleter};
use kube_retention_bench::deletion::{self, Scenario, Shape};
use kube_retention_bench::{discovery, memory, metrics_port, mib, policies, report};
use kube_retention_e2e::components::CONTROLLER;
use kube_retention_e2e::process::tracked;
use kube_retention_e2e::{Layout, LocalCluster};

#[derive(Parser)]
struct Args {
    /// Jobs finishing together under the request budget [default: 500; 1,000 with --full].
    #[arg(long)]
    budgeted_burst: Option<usize>,
    /// Jobs finishing together without a budget [default: 1,000; 10,000 with --full].
    #[arg(long)]
    unlimited_burst: Option<usize>,
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
    /// Jobs tracked for the memory figures, one run each [default: 10,000; 10,000, 100,000 and
    /// 300,000 with --full].
    #[arg(long, value_delimiter = ',')]
    tracked: Option<Vec<usize>>,
    #[arg(long, default_value = "docs/benchmarks.md")]
    report: PathBuf,
    /// Jobs the webhook never saw, for the cost of finding them [default: 2,000; 10,000 with
    /// --full].
    #[arg(long)]
    unlabelled: Option<usize>,
    /// Objects under one ClusterRetentionPolicy, for its memory and the cost of changing it
    /// [default: 20,000; 100,000 with --full].
    #[arg(long)]
    policy_objects: Option<usize>,
    /// The kinds those objects are spread over.
    #[arg(long, default_value_t = 10)]
    policy_kinds: usize,
    /// Run only the deletion scenarios, the memory figure, the cost of finding unlabelled Jobs,
    /// or policies at scale.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// The long form (about an hour): the sizes docs/benchmarks.md reports at full scale. The
    /// default finishes in about ten minutes.
    #[arg(long)]
    full: bool,
}

impl Args {
    fn size(&self, given: Option<usize>, short: usize, full: usize) -> usize {
        given.unwrap_or(if self.full { full } else { short })
    }

    fn unlimited_burst(&self) -> usize {
        self.size(self.unlimited_burst, 1_000, 10_000)
    }

    fn budgeted_burst(&self) -> usize {
        self.size(self.budgeted_burst, 500, 1_000)
    }

    /// Long enough to finish every Job of the unlimited burst before the first expires.
    fn unlimited_ttl(&self) -> u32 {
        if self.unlimited_burst() > 2_000 {
            60
        } else {
            30
        }
    }

    fn unlabelled(&self) -> usize {
        self.size(self.unlabelled, 2_000, 10_000)
    }

    fn policy_objects(&self) -> usize {
        self.size(self.policy_objects, 20_000, 100_000)
    }

    fn tracked(&self) -> Vec<usize> {
        match (&self.tracked, self.full) {
            (Some(given), _) => given.clone(),
            (None, false) => vec![10_000],
            (None, true) => vec![10_000, 100_000, 300_000],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Deletion,
    Memory,
    Discovery,
    Policies,
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
        mib(figures.rss_kib),
        mib(figures.peak_rss_kib),
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
            deleters: vec![Deleter::KubeRetention, Deleter::Peer],
        },
        Scenario {
            name: "burst, budgeted".into(),
            jobs: args.budgeted_burst(),
            budget: Some(args.budget),
            shape: Shape::Burst { ttl: 30 },
            deleters: vec![Deleter::KubeRetention, Deleter::Peer],
        },
        Scenario {
            name: "burst, unlimited".into(),
            jobs: args.unlimited_burst(),
            budget: None,
            shape: Shape::Burst {
                ttl: args.unlimited_ttl(),
            },
            deleters: vec![
                Deleter::KubeRetention,
                Deleter::KubeRetentionEventEach,
                Deleter::Peer,
                Deleter::PeerTuned,
            ],
        },
    ];
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    if runs(Part::Deletion) {
        let target = deletion::Report {
            file: &root.join(&args.report),
            root,
            steady_rate: args.steady_rate,
        };
        deletion::run(cluster, &client, &scenarios, &target).await?;
    }
    // Each part removes its namespace, so the memory figures count their own Jobs alone; the
    // policy objects, which are cluster-wide, come last.
    if runs(Part::Memory) {
        let readings = memory::measure(cluster, &client, &args.tracked()).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-memory",
            &memory::section(&readings),
        )?;
    }
    if runs(Part::Discovery) {
        let figures =
            discovery::measure(cluster, &client, args.unlabelled(), metrics_port()?).await?;
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
            args.policy_objects(),
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
    Ok(())
}
