//! `controller-bench`'s flags: the size of each part, which parts run, and the long forms.

use std::path::PathBuf;

use clap::Parser;
use kube_retention_bench::deleters::Deleter;
use kube_retention_bench::deletion::{Scenario, Shape};

#[derive(Parser)]
pub struct Args {
    /// Jobs finishing together under the request budget [default: 300; 1,000 with --full].
    #[arg(long)]
    pub budgeted_burst: Option<usize>,
    /// Jobs finishing together without a budget [default: 1,000; 10,000 with --full].
    #[arg(long)]
    pub unlimited_burst: Option<usize>,
    /// The shared client request budget, requests per second.
    #[arg(long, default_value_t = 20)]
    pub budget: u32,
    /// Seconds of steady expiries.
    #[arg(long, default_value_t = 20)]
    pub steady_seconds: usize,
    /// Expiries per second in the steady scenario.
    #[arg(long, default_value_t = 20)]
    pub steady_rate: usize,
    /// Request budget of the steady scenario: kube-retention's default.
    #[arg(long, default_value_t = 50)]
    pub steady_budget: u32,
    /// Jobs tracked for the memory figures, one run each [default: 10,000; 10,000, 100,000 and
    /// 300,000 with --full].
    #[arg(long, value_delimiter = ',')]
    pub tracked: Option<Vec<usize>>,
    /// The folder of the benchmarks' pages, each result written into its area's page.
    #[arg(long, default_value = "docs/benchmarks")]
    pub report: PathBuf,
    /// Jobs the webhook never saw, for the cost of finding them [default: 2,000; 10,000 with
    /// --full].
    #[arg(long)]
    pub unlabelled: Option<usize>,
    /// Jobs tracked when kube-retention restarts cold [default: 10,000; 100,000 with --full].
    #[arg(long)]
    pub restart_tracked: Option<usize>,
    /// Of those, the Jobs overdue at its start [default: 1,000; 10,000 with --full].
    #[arg(long)]
    pub restart_overdue: Option<usize>,
    /// Its request budget, requests per second.
    #[arg(long, default_value_t = 200)]
    pub restart_budget: u32,
    /// Objects under one ClusterRetentionPolicy, for its memory and the cost of changing it
    /// [default: 20,000; 100,000 with --full].
    #[arg(long)]
    pub policy_objects: Option<usize>,
    /// The kinds those objects are spread over.
    #[arg(long, default_value_t = 10)]
    pub policy_kinds: usize,
    /// Run only the deletion scenarios, the memory figure, the restart at scale, the cost of
    /// finding unlabelled Jobs, or policies at scale.
    #[arg(long, value_enum)]
    pub only: Option<Part>,
    /// The long form (about an hour): the sizes docs/benchmarks/ reports at full scale. The
    /// default finishes in about ten minutes.
    #[arg(long)]
    pub full: bool,
    /// Rounds of `--only ceiling`, each kube-retention's unlimited burst then the ceiling's (of
    /// 10,000 Jobs unless `--unlimited-burst` says otherwise).
    #[arg(long, default_value_t = 3)]
    pub ceiling_rounds: usize,
    /// Only the envelope at scale (about an hour and a half): `--huge-jobs` Jobs, what each
    /// deleter and the control plane hold, and a cold start with a tenth of them overdue.
    #[arg(long)]
    pub huge: bool,
    /// The Jobs of `--huge`.
    #[arg(long, default_value_t = 1_000_000)]
    pub huge_jobs: usize,
    /// The request budget of `--huge`'s cold starts, requests per second.
    #[arg(long, default_value_t = 500)]
    pub huge_budget: u32,
    /// `--huge` creates no more Jobs once the machine has less memory available than this
    /// (GiB), and measures at the count reached: room for the API server's list peaks in the
    /// cold starts (2.9 GiB over its resting memory at 400,000 Jobs) and for one more step of
    /// 100,000 Jobs (1.6 GiB).
    #[arg(long, default_value_t = 6.0)]
    pub huge_reserve_gib: f64,
    /// kube-apiserver's `GOMEMLIMIT` during `--huge` ("none": Go's default, collecting only once
    /// the heap has doubled): a cap, not a squeeze. Its live heap held 6.1 GiB at a million
    /// Jobs; under a 10 GiB limit its garbage collector took about half its CPU and every list
    /// and write slowed with it, so the default leaves room for the doubling.
    #[arg(long, default_value = "14GiB")]
    pub huge_apiserver_memory_limit: String,
}

impl Args {
    /// The steady scenario, run by each of `deleters`.
    pub fn steady(&self, deleters: Vec<Deleter>) -> Scenario {
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

    pub fn size(&self, given: Option<usize>, short: usize, full: usize) -> usize {
        given.unwrap_or(if self.full { full } else { short })
    }

    pub fn unlimited_burst(&self) -> usize {
        self.size(self.unlimited_burst, 1_000, 10_000)
    }

    pub fn budgeted_burst(&self) -> usize {
        self.size(self.budgeted_burst, 300, 1_000)
    }

    /// Long enough to finish every Job of a burst before the first expires.
    pub fn burst_ttl(jobs: usize) -> u32 {
        if jobs > 2_000 { 60 } else { 10 }
    }

    pub fn unlabelled(&self) -> usize {
        self.size(self.unlabelled, 2_000, 10_000)
    }

    pub fn policy_objects(&self) -> usize {
        self.size(self.policy_objects, 20_000, 100_000)
    }

    pub fn tracked(&self) -> Vec<usize> {
        match (&self.tracked, self.full) {
            (Some(given), _) => given.clone(),
            (None, false) => vec![10_000],
            (None, true) => vec![10_000, 100_000, 300_000],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    Deletion,
    /// The unlimited burst, kube-retention and the ceiling alone (not in the default run, which
    /// runs both in the deletion part): the envelope-ceiling section.
    Ceiling,
    /// The steady scenario with the deletion ledger off and on (not in the default run).
    Ledger,
    Memory,
    Restart,
    Discovery,
    Policies,
    /// Judging objects with a one-label policy, this controller against the baseline
    /// (`KUBE_RETENTION_BASELINE`) where one is given.
    PolicyCel,
}
