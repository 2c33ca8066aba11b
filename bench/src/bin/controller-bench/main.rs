//! `make bench-controller`: kube-retention's controller against kube-controller-manager's
//! ttl-after-finished controller, side by side in one run on a private local cluster, at the same
//! client request budget. Deletion delay p50/p99/max, deletions per second, API requests per
//! deletion (from the audit log), peak RSS ([`deletion`]); the cost of finding objects the webhook
//! never saw; policies at scale; memory with many tracked Jobs ([`memory`]); a cold restart with
//! many tracked and some overdue ([`restart`]); in the unlimited burst, the ceiling a deleter with
//! no logic reaches. Results go into docs/benchmarks/. The default takes about ten minutes;
//! `--full` is the long form; `--huge` measures a million Jobs alone ([`envelope`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use kube_retention_bench::deleters::{self, Deleter};
use kube_retention_bench::deletion::{self, Scenario, Shape};
use kube_retention_bench::{discovery, envelope, memory, metrics_port, policies, report, restart};
use kube_retention_e2e::LocalCluster;

mod args;

use args::{Args, Part};

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

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // `make bench-controller` sets KUBE_RETENTION_PROFILE (the image's static build) and the audit policy.
    kube_retention_bench::on_private_cluster(
        "kube-retention-bench-",
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
    let scenarios = [
        args.steady(vec![
            Deleter::KubeRetention,
            Deleter::KubeRetentionStamped,
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
            reserve_kib: (args.huge_reserve_gib * 1024.0 * 1024.0) as u64,
            apiserver_memory_limit: Some(args.huge_apiserver_memory_limit.clone())
                .filter(|limit| limit != "none"),
        };
        let figures = envelope::measure(cluster, client, size).await?;
        // A section per size asked for: a run at one size leaves the others' figures be.
        return report::write_section(
            &root.join(&args.report),
            &format!("envelope-scale-{}", args.huge_jobs),
            &envelope::section(&figures),
        );
    }
    if args.only == Some(Part::Ceiling) {
        let _timer = Timer::new("ceiling");
        let jobs = args.unlimited_burst.unwrap_or(10_000);
        let burst = Scenario {
            jobs,
            shape: Shape::Burst {
                ttl: Args::burst_ttl(jobs),
            },
            ..scenarios[2].clone()
        };
        let file = root.join(&args.report);
        return deletion::run_ceiling(cluster, client, burst, args.ceiling_rounds, &file).await;
    }
    if args.only == Some(Part::Ledger) {
        let _timer = Timer::new("ledger");
        let target = deletion::Report {
            file: &root.join(&args.report),
            steady_rate: args.steady_rate,
        };
        let steady = args.steady(vec![Deleter::KubeRetention, Deleter::KubeRetentionLedger]);
        return deletion::run_ledger(cluster, client, steady, &target).await;
    }
    if runs(Part::Deletion) {
        let _timer = Timer::new("deletion");
        let target = deletion::Report {
            file: &root.join(&args.report),
            steady_rate: args.steady_rate,
        };
        deletion::run(cluster, client, &scenarios, &target).await?;
    }
    // Each part removes its namespace, so the memory figures count their own Jobs alone; the
    // policy objects, which are cluster-wide, come last.
    if runs(Part::Memory) {
        let _timer = Timer::new("memory");
        let readings = memory::measure(cluster, client, &args.tracked()).await?;
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
        let figures = restart::measure(cluster, client, size).await?;
        report::write_section(
            &root.join(&args.report),
            "controller-restart",
            &restart::section(&figures),
        )?;
    }
    if runs(Part::Discovery) {
        let _timer = Timer::new("discovery");
        let figures =
            discovery::measure(cluster, client, args.unlabelled(), metrics_port()?).await?;
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
            client,
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
    if runs(Part::PolicyCel) {
        let _timer = Timer::new("one-label policy");
        let mut contenders = vec![Deleter::KubeRetention];
        if deleters::baseline_binary().is_some() {
            contenders.insert(0, Deleter::KubeRetentionBaseline);
        }
        let objects = args.policy_objects();
        let judged = policies::measure_one_label(
            cluster,
            client,
            objects,
            args.policy_kinds,
            metrics_port()?,
            &contenders,
            2,
        )
        .await?;
        report::write_section(
            &root.join(&args.report),
            "controller-policies-cel",
            &policies::one_label_section(objects, args.policy_kinds, &judged),
        )?;
    }
    Ok(())
}
