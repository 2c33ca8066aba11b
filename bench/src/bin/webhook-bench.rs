//! `make bench-webhook`: AdmissionReview load over TLS against the release webhook, from this
//! separate process, at fixed rates and then closed-loop to saturation. Reports p50/p99/p99.9
//! latency, throughput and the webhook's peak RSS into docs/benchmarks.md, then what the writer
//! check costs ([`kube_retention_bench::writers`]). The webhook asks a private local cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use hyper::body::Bytes;
use kube_retention_bench::load::{self, Outcome, Target};
use kube_retention_bench::webhook::{self, Webhook, release_binary, review};
use kube_retention_bench::writers::{self, WRITER};
use kube_retention_bench::{report, rss_kib};
use kube_retention_e2e::cluster::WEBHOOK_SERVICE_ACCOUNT;
use kube_retention_e2e::process::tracked;
use kube_retention_e2e::{Layout, LocalCluster};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Seconds per fixed-rate step.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Fixed rates to run, requests per second.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000,4000")]
    rates: Vec<u64>,
    /// Fixed rates for the writer check with a new writer per request (a review each).
    #[arg(long, value_delimiter = ',', default_value = "100,250,500")]
    uncached_rates: Vec<u64>,
    /// Connections for the fixed-rate steps and for saturation.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Where to write the results.
    #[arg(long, default_value = "docs/benchmarks.md")]
    report: PathBuf,
}

/// A mix of what the webhook sees: a denied Build, an annotated ConfigMap to stamp, an
/// annotated Job to validate, and a finished Job whose expiry is recomputed on UPDATE.
fn requests() -> Vec<(&'static str, Bytes)> {
    let build = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build", "metadata": {"name": "b"},
        "spec": {"strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"}, "output": {"image": "r/b"},
                 "retention": {"ttlAfterFailed": "1d", "succeededLimit": 101}}});
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"retention.dev/ttl": "10m"}}, "data": {"k": "v"}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": {"retention.dev/ttl-after-failed": "2s", "retention.dev/ttl-after-succeeded": "1h"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}},
        "status": {"completionTime": "2026-01-01T00:05:00Z", "conditions": [{"type": "Complete", "status": "True"}]}});
    vec![
        (
            "/validate",
            review("CREATE", "shipwright.io", "Build", build, WRITER),
        ),
        (
            "/mutate",
            review("CREATE", "", "ConfigMap", config_map, WRITER),
        ),
        (
            "/validate",
            review("CREATE", "batch", "Job", job.clone(), WRITER),
        ),
        ("/mutate", review("UPDATE", "batch", "Job", job, WRITER)),
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let binary = release_binary(&root, "kube-retention-webhook")?;
    let state = tempfile::Builder::new()
        .prefix("kube-retention-bench-")
        .tempdir()?;
    println!("starting a private cluster in {}", state.path().display());
    let (cluster, _) = LocalCluster::up(Layout::new(state.path())?)?;
    let outcome = bench(&args, &cluster, &binary).await;
    LocalCluster::down(&cluster.layout)?;
    outcome
}

async fn bench(args: &Args, cluster: &LocalCluster, binary: &std::path::Path) -> Result<()> {
    // Only the webhook under test runs: the cluster's own kube-retention processes would share
    // the two cores.
    for process in tracked(
        &cluster.layout.state_dir,
        &["kube-retention-webhook", "kube-retention-controller"],
    ) {
        process.stop(Duration::from_secs(10))?;
    }
    kube_retention_e2e::run(
        cluster
            .kubectl()
            .args(["create", "namespace", webhook::NAMESPACE]),
    )?;
    writers::grant_writer(cluster)?;
    let tls = tempfile::tempdir()?;
    let ca = webhook::certificates(tls.path())?;
    let kubeconfig = cluster.service_account_kubeconfig(WEBHOOK_SERVICE_ACCOUNT);
    {
        let webhook = Webhook::start(binary, tls.path(), &kubeconfig, &[])?;
        let target = webhook::target(&ca, webhook.port, requests())?;
        mix(args, target, webhook.pid()).await?;
    }
    let setup = writers::Setup {
        cluster,
        binary,
        tls: tls.path(),
        ca: &ca,
        kubeconfig: &kubeconfig,
        seconds: args.seconds,
        connections: args.connections,
    };
    let rows = writers::measure(&setup, &args.rates, &args.uncached_rates).await?;
    let body = format!(
        "### What the writer check costs\n\n\
         Measured with `make bench-webhook` (`bench/src/writers.rs`), in the same run: a ConfigMap\n\
         given `retention.dev/ttl` through `/validate`, the release webhook asking the run's local\n\
         API server (`--kubeconfig` of its ServiceAccount). The check off (`--check-writers=false`);\n\
         on with one writer, allowed by a Role (answers cached 5 s); on with a new writer for every\n\
         request (no RBAC: each is refused after its own SubjectAccessReview). Reviews are counted\n\
         from the API server's `apiserver_request_total`. {seconds} s per step, {connections}\n\
         connections, open loop.\n\n\
         | check | writers | load | completed | errors | p50 (ms) | p99 (ms) | p99.9 (ms) | SubjectAccessReviews |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{rows}\n",
        seconds = args.seconds,
        connections = args.connections,
    );
    report::write_section(&args.report, "webhook-writers", &body)?;
    println!("written to {}", args.report.display());
    Ok(())
}

/// The mix at fixed rates and to saturation, with the webhook's memory: the `webhook` section.
async fn mix(args: &Args, target: Arc<Target>, pid: u32) -> Result<()> {
    webhook::wait_until_serving(&target).await?;
    let idle = rss_kib(pid).context("webhook RSS")?;
    println!("warming up");
    load::fixed_rate(
        target.clone(),
        500,
        Duration::from_secs(2),
        args.connections,
    )
    .await;
    let mut rows = Vec::new();
    for &rate in &args.rates {
        let outcome = load::fixed_rate(
            target.clone(),
            rate,
            Duration::from_secs(args.seconds),
            args.connections,
        )
        .await;
        let row = row(&format!("{rate} req/s"), &outcome, pid);
        println!("{row}");
        rows.push(row);
    }
    let outcome = load::saturate(
        target.clone(),
        Duration::from_secs(args.seconds),
        args.connections,
    )
    .await;
    let row = row(
        &format!("saturation ({} connections)", args.connections),
        &outcome,
        pid,
    );
    println!("{row}");
    rows.push(row);
    let (peak, _) = rss_kib(pid).context("webhook RSS")?;

    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let body = format!(
        "## Webhook: AdmissionReview load over TLS\n\n\
         Measured with `make bench-webhook` (`bench/src/bin/webhook-bench.rs`): the release webhook\n\
         as its own process; this load generator as another, on the same {cpus}-core machine, over\n\
         {connections} keep-alive HTTP/1.1 TLS connections. The mix, round-robin: a Build denied\n\
         for two errors, a ConfigMap stamped with `expires-at` (patch), an annotated Job validated,\n\
         a finished Job re-stamped on UPDATE, all by a writer allowed to delete them (the writer\n\
         check on, asking the run's local API server, answers cached 5 s; its cost is measured\n\
         below). Latency counts from when each request was due\n\
         (open loop), so queueing is included. {seconds} s per step.\n\n\
         | load | completed | errors | throughput (req/s) | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | webhook RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{}\n\n\
         Webhook RSS idle after start: {:.1} MiB; peak over the whole run (VmHWM): {:.1} MiB.\n\
         Goals: p99 ≤ 1 ms at 1,000 req/s, ≤ 20 MiB RSS.\n",
        rows.join("\n"),
        idle.1 as f64 / 1024.0,
        peak as f64 / 1024.0,
        connections = args.connections,
        seconds = args.seconds,
    );
    report::write_section(&args.report, "webhook", &body)?;
    println!(
        "peak RSS {:.1} MiB; written to {}",
        peak as f64 / 1024.0,
        args.report.display()
    );
    Ok(())
}

fn row(load: &str, outcome: &Outcome, pid: u32) -> String {
    let rss = rss_kib(pid).map_or(0.0, |(_, current)| current as f64 / 1024.0);
    format!(
        "| {load} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {rss:.1} |",
        outcome.completed,
        outcome.errors,
        outcome.throughput(),
        outcome.millis(50.0),
        outcome.millis(99.0),
        outcome.millis(99.9),
        outcome.latency.max() as f64 / 1000.0,
    )
}
