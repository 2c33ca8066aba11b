//! `make bench-peers`: kube-retention's controller against the cleanup tools admins install
//! instead, side by side in one run on a private local cluster, one deleter at a time on
//! identical Jobs: precision (Jobs expiring steadily), throughput (Jobs expiring at once, at an
//! equal request budget and unlimited), requests per deletion, CPU and peak memory; then, with
//! many Jobs none of them deletes yet, what each holds and asks for while idle; then what each
//! does when a Job changes at the last moment ([`kube_retention_bench::safety`]). The peers are
//! built by `bench/peers/build.sh` from their own pinned modules; today that is Kyverno's cleanup
//! controller ([`kube_retention_bench::kyverno`]), two ways. Results go into
//! docs/benchmarks/peers.md. The default is sized for about fifteen minutes; `--full` is the long
//! form.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use kube_retention_bench::deleters::Deleter;
use kube_retention_bench::deletion::{self, Scenario, Shape};
use kube_retention_bench::{idle, kyverno, report, safety};
use kube_retention_e2e::LocalCluster;

#[derive(Parser)]
#[command(about = "kube-retention against the cleanup tools admins install instead")]
struct Args {
    /// Jobs whose expiries are spread over `--precision-seconds` [default: 300; 2,000 with
    /// --full].
    #[arg(long)]
    precision_jobs: Option<usize>,
    /// The seconds they expire over [default: 30; 300 with --full].
    #[arg(long)]
    precision_seconds: Option<usize>,
    /// Jobs expiring at once, at the budget and unlimited [default: 1,000; 10,000 with --full].
    #[arg(long)]
    burst: Option<usize>,
    /// The shared client request budget of the precision and the budgeted burst, requests per
    /// second: kube-retention's default.
    #[arg(long, default_value_t = 50)]
    budget: u32,
    /// Jobs present while the deleters idle, one run each [default: 2,000; 10,000 and 100,000
    /// with --full].
    #[arg(long, value_delimiter = ',')]
    idle: Option<Vec<usize>>,
    /// Run only the deletion scenarios, the idle readings or the safety cases.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// The folder of the benchmarks' pages.
    #[arg(long, default_value = "docs/benchmarks")]
    report: PathBuf,
    /// The long form: the sizes docs/benchmarks/peers.md reports.
    #[arg(long)]
    full: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Deletion,
    Idle,
    Safety,
}

/// Who is measured, each alone.
const DELETERS: [Deleter; 3] = [
    Deleter::KubeRetention,
    Deleter::KyvernoTtl,
    Deleter::KyvernoPolicy,
];

impl Args {
    fn idle_sizes(&self) -> Vec<usize> {
        self.idle.clone().unwrap_or_else(|| {
            if self.full {
                vec![10_000, 100_000]
            } else {
                vec![2_000]
            }
        })
    }

    /// The command this run's sections name as the one that wrote them.
    fn command(&self) -> &'static str {
        if self.full {
            "make bench-peers BENCH_ARGS=--full"
        } else {
            "make bench-peers"
        }
    }

    /// The name of this run's section `part`: the long form's stand beside the default's.
    fn section(&self, part: &str) -> String {
        if self.full {
            format!("{part}-full")
        } else {
            part.to_owned()
        }
    }

    fn size(&self, given: Option<usize>, short: usize, full: usize) -> usize {
        given.unwrap_or(if self.full { full } else { short })
    }

    fn scenarios(&self) -> Vec<Scenario> {
        let deleters = DELETERS.to_vec();
        let jobs = self.size(self.precision_jobs, 300, 2_000);
        let seconds = self.size(self.precision_seconds, 30, 300).max(1);
        let rate = jobs.div_ceil(seconds);
        let burst = self.size(self.burst, 1_000, 10_000);
        // Long enough to finish and label every Job of a burst before the first expires.
        let burst_ttl = if burst > 2_000 { 120 } else { 30 };
        let burst_scenario = |name: &str, budget, deleters: Vec<Deleter>| Scenario {
            name: name.into(),
            jobs: burst,
            budget,
            shape: Shape::Burst { ttl: burst_ttl },
            deleters,
        };
        // What the `expires-at` stamp costs, in the scenario whose pace no budget sets.
        let mut stamped = deleters.clone();
        stamped.insert(1, Deleter::KubeRetentionStamped);
        vec![
            Scenario {
                name: format!("precision, {jobs} Jobs over {seconds} s"),
                jobs,
                budget: Some(self.budget),
                shape: Shape::Steady {
                    rate,
                    seconds,
                    ttl: 10,
                },
                deleters: deleters.clone(),
            },
            burst_scenario("burst, budgeted", Some(self.budget), deleters.clone()),
            burst_scenario("burst, unlimited", None, stamped),
        ]
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    kube_retention_bench::on_private_cluster(
        "kube-retention-peers-",
        |cluster, client| async move { bench(&args, &cluster, &client, &root).await },
    )
    .await
}

async fn bench(
    args: &Args,
    cluster: &LocalCluster,
    client: &kube::Client,
    root: &std::path::Path,
) -> Result<()> {
    kyverno::install(cluster)?;
    let report = root.join(&args.report);
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    if runs(Part::Deletion) {
        let started = std::time::Instant::now();
        let section = args.section("peers");
        let target = deletion::PeersReport {
            file: &report,
            section: &section,
            heading: if args.full {
                "The long form: kube-retention against Kyverno's cleanup controller"
            } else {
                "Peers: kube-retention against Kyverno's cleanup controller"
            },
            command: args.command(),
        };
        deletion::run_peers(cluster, client, &args.scenarios(), &target).await?;
        println!("deletion took {:.0} s", started.elapsed().as_secs_f64());
    }
    if runs(Part::Idle) {
        let started = std::time::Instant::now();
        let readings = idle::measure(cluster, client, &args.idle_sizes(), &DELETERS).await?;
        report::write_section(
            &report,
            &args.section("peers-idle"),
            &idle::section(&readings, args.command()),
        )?;
        println!("idle took {:.0} s", started.elapsed().as_secs_f64());
    }
    if runs(Part::Safety) {
        let started = std::time::Instant::now();
        let observations = safety::observe(cluster, client, &DELETERS).await?;
        // What each does at the last moment has no size: one section for either form.
        report::write_section(
            &report,
            "peers-safety",
            &safety::section(&observations, args.command()),
        )?;
        println!("safety took {:.0} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}
