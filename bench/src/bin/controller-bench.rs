//! `make bench-controller`: kube-retention's controller against kube-controller-manager's
//! ttl-after-finished controller, side by side in one run on a private local cluster, at the same
//! client request budget. Deletion delay p50/p99/max, deletions per second, API requests per
//! deletion (from the audit log), peak RSS ([`deletion`]); the cost of finding objects the webhook
//! never saw; policies at scale; memory with many tracked Jobs ([`memory`]); a cold restart with
//! many tracked and some overdue ([`restart`]); in the unlimited burst, the ceiling a deleter with
//! no logic reaches. Results go into docs/benchmarks.md. The default takes about ten minutes;
//! `--full` is the long form; `--huge` measures a million Jobs alone ([`envelope`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use kube_retention_bench::deleters::{self, Deleter};
use kube_retention_bench::deletion::{self, Scenario, Shape};
use kube_retention_bench::{discovery, envelope, memory, metrics_port, policies, report, restart};
use kube_retention_e2e::components::CONTROLLER;
use kube_retention_e2e::process::tracked;
use kube_retention_e2e::{Layout, LocalCluster};

#[derive(Parser)]
struct Args {
    /// Jobs finishing together under the request budget [default: 300; 1,000 with --full].
    #[arg(long)]
    budgeted_burst: Option<usize>,
    /// Jobs finishing together without a budget [default: 1,000; 10,000 with --full].
    #[arg(long)]
    unlimited_burst: Option<usize>,
    /// The shared client request budget, requests per second.
    #[arg(long, default_value_t = 20)]
    budget: u32,
    /// Seconds of steady expiries.
    #[arg(long, default_value_t = 20)]
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
    /// Jobs tracked when kube-retention restarts cold [default: 10,000; 100,000 with --full].
    #[arg(long)]
    restart_tracked: Option<usize>,
    /// Of those, the Jobs overdue at its start [default: 1,000; 10,000 with --full].
    #[arg(long)]
    restart_overdue: Option<usize>,
    /// Its request budget, requests per second.
    #[arg(long, default_value_t = 200)]
    restart_budget: u32,
    /// Objects under one ClusterRetentionPolicy, for its memory and the cost of changing it
    /// [default: 20,000; 100,000 with --full].
    #[arg(long)]
    policy_objects: Option<usize>,
    /// The kinds those objects are spread over.
    #[arg(long, default_value_t = 10)]
    policy_kinds: usize,
    /// Run only the deletion scenarios, the memory figure, the restart at scale, the cost of
    /// finding unlabelled Jobs, or policies at scale.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// The long form (about an hour): the sizes docs/benchmarks.md reports at full scale. The
    /// default finishes in about ten minutes.
    #[arg(long)]
    full: bool,
    /// Only the envelope at scale (about an hour and a half): `--huge-jobs` Jobs, what each
    /// deleter and the control plane hold, and a cold start with a tenth of them overdue.
    #[arg(long)]
    huge: bool,
    /// The Jobs of `--huge`.
    #[arg(long, default_value_t = 1_000_000)]
    huge_jobs: usize,
    /// The request budget of `--huge`'s cold starts, requests per second.
    #[arg(long, default_value_t = 500)]
    huge_budget: u32,
}

impl Args {
    /// The steady scenario, run by each of `deleters`.
    fn steady(&self, deleters: Vec<Deleter>) -> Scenario {
        Scenario {
            name: format!("steady {} expiries/s", self.steady_rate),
            jobs: self.steady_rate * self.steady_seconds,
            budget: Some(self.steady_budget),
            shape: Shape::Steady {
                rate: self.steady_rate,
                seconds: self.steady_seconds,
                ttl: 10,
            },
            deleters,
        }
    }

    fn size(&self, given: Option<usize>, short: usize, full: usize) -> usize {
        given.unwrap_or(if self.full { full } else { short })
    }

    fn unlimited_burst(&self) -> usize {
        self.size(self.unlimited_burst, 1_000, 10_000)
    }

    fn budgeted_burst(&self) -> usize {
        self.size(self.budgeted_burst, 300, 1_000)
    }

    /// Long enough to finish every Job of a burst before the first expires.
    fn burst_ttl(jobs: usize) -> u32 {
        if jobs > 2_000 { 60 } else { 10 }
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

/// Prints how long a part took when it ends.
struct Timer(&'static str, std::time::Instant);

impl Timer {
    fn new(part: &'static str) -> Self {
        Self(part, std::time::Instant::now())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        println!("{} took {:.0} s", self.0, self.1.elapsed().as_secs_f64());
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Deletion,
    /// The steady scenario with the deletion ledger off and on (not in the default run).
    Ledger,
    Memory,
    Restart,
    Discovery,
    Policies,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // `make bench-controller` sets KUBE_RETENTION_PROFILE (the image's static build) and the audit policy.
    let state = tempfile::Builder::new()
        .prefix("kube-retention-bench-")
        .tempdir()?;
    let layout = Layout::new(state.path())?;
    println!("starting a private cluster in {}", state.path().display());
    let (cluster, _) = LocalCluster::up(layout)?;
    let outcome = kube_retention_bench::until_interrupted(bench(&args, &cluster, &root)).await;
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
        args.steady(vec![
            Deleter::KubeRetention,
            Deleter::KubeRetentionNoStamp,
            Deleter::Peer,
        ]),
        Scenario {
            name: "burst, budgeted".into(),
            jobs: args.budgeted_burst(),
            budget: Some(args.budget),
            shape: Shape::Burst {
                ttl: Args::burst_ttl(args.budgeted_burst()),
            },
            deleters: vec![Deleter::KubeRetention, Deleter::Peer],
        },
        Scenario {
            name: "burst, unlimited".into(),
            jobs: args.unlimited_burst(),
            budget: None,
            shape: Shape::Burst {
                ttl: Args::burst_ttl(args.unlimited_burst()),
            },
            deleters: vec![
                Deleter::KubeRetention,
                Deleter::KubeRetentionEventEach,
                Deleter::Peer,
                Deleter::PeerTuned,
                Deleter::Ceiling,
            ],
        },
    ];
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    if args.huge {
        let _timer = Timer::new("envelope at scale");
        let size = envelope::Size {
            jobs: args.huge_jobs,
            budget: args.huge_budget,
        };
        let figures = envelope::measure(cluster, &client, size).await?;
        return report::write_section(
            &root.join(&args.report),
            "envelope-scale",
            &envelope::section(&figures),
        );
    }
    if args.only == Some(Part::Ledger) {
        let _timer = Timer::new("ledger");
        let target = deletion::Report {
            file: &root.join(&args.report),
            root,
            steady_rate: args.steady_rate,
        };
        let steady = args.steady(vec![Deleter::KubeRetention, Deleter::KubeRetentionLedger]);
        return deletion::run_ledger(cluster, &client, steady, &target).await;
    }
    if runs(Part::Deletion) {
        let _timer = Timer::new("deletion");
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
        let _timer = Timer::new("memory");
        let readings = memory::measure(cluster, &client, &args.tracked()).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-memory",
            &memory::section(&readings),
        )?;
    }
    if runs(Part::Restart) {
        let _timer = Timer::new("restart");
        let size = restart::Size {
            tracked: args.size(args.restart_tracked, 10_000, 100_000),
            due: args.size(args.restart_overdue, 1_000, 10_000),
            budget: args.restart_budget,
        };
        let figures = restart::measure(cluster, &client, size).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-restart",
            &restart::section(&figures),
        )?;
    }
    if runs(Part::Discovery) {
        let _timer = Timer::new("discovery");
        let figures =
            discovery::measure(cluster, &client, args.unlabelled(), metrics_port()?).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-discovery",
            &discovery::section(&figures),
        )?;
    }
    if runs(Part::Policies) {
        let _timer = Timer::new("policies");
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
            &policies::section(&figures),
        )?;
    }
    Ok(())
}
