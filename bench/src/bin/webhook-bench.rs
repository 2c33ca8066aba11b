//! `make bench-webhook`: AdmissionReview load over TLS against the release webhook and the Go
//! peer (`bench/webhook-peer`), one after the other in the same run, from this separate process,
//! at fixed rates and then closed-loop to saturation ([`side_by_side`]); then the same generated
//! AdmissionReviews to both, their answers compared ([`mod@differential`]); then what the writer
//! check costs ([`kube_retention_bench::writers`]). Both webhooks ask a private local cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use hyper::body::Bytes;
use kube_retention_bench::report;
use kube_retention_bench::side_by_side::{self, Contender, Load};
use kube_retention_bench::webhook::{self, existing, review};
use kube_retention_bench::writers::{self, WRITER};
use kube_retention_bench::{differential, memcpy};
use kube_retention_e2e::cluster::WEBHOOK_SERVICE_ACCOUNT;
use kube_retention_e2e::components::WEBHOOK;
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
    /// Generated AdmissionReviews sent to both webhooks and compared.
    #[arg(long, default_value_t = 200_000)]
    differential_cases: u64,
    /// kube-retention's webhook to measure [default: the local cluster's, from the build
    /// `KUBE_RETENTION_PROFILE` names; `make bench-webhook` sets the image's static one].
    #[arg(long)]
    webhook: Option<PathBuf>,
    /// The Go peer (`bench/webhook-peer/build.sh` builds it).
    #[arg(long, default_value = "bench/webhook-peer/bin/webhook-peer")]
    peer: PathBuf,
    /// The folder of the benchmarks' pages, each result written into its area's page.
    #[arg(long, default_value = "docs/benchmarks")]
    report: PathBuf,
    /// Run only the side-by-side load, the differential check, the writer check's cost, or
    /// the memcpy/ crate's worth (only on request: it needs `--without-memcpy`).
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// The static webhook built without the `memcpy` feature, for `--only memcpy`.
    #[arg(long)]
    without_memcpy: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    SideBySide,
    Differential,
    Writers,
    Memcpy,
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
    let state = tempfile::Builder::new()
        .prefix("kube-retention-bench-")
        .tempdir()?;
    let layout = Layout::new(state.path())?;
    let binary = existing(
        &args
            .webhook
            .clone()
            .unwrap_or_else(|| layout.cargo_binary(WEBHOOK)),
    )?;
    println!("starting a private cluster in {}", state.path().display());
    let (cluster, _) = LocalCluster::up(layout)?;
    let outcome = kube_retention_bench::until_interrupted(bench(&args, &cluster, &binary)).await;
    LocalCluster::down(&cluster.layout)?;
    outcome
}

async fn bench(args: &Args, cluster: &LocalCluster, binary: &std::path::Path) -> Result<()> {
    kube_retention_e2e::run(
        cluster
            .kubectl()
            .args(["create", "namespace", webhook::NAMESPACE]),
    )?;
    // While the cluster's own webhook still admits them: the Builds BuildRuns name.
    differential::seed_parents(cluster)?;
    // Only the webhook under test runs: the cluster's own kube-retention processes would share
    // the two cores.
    for process in tracked(
        &cluster.layout.state_dir,
        &["kube-retention-webhook", "kube-retention-controller"],
    ) {
        process.stop(Duration::from_secs(10))?;
    }
    writers::grant_writer(cluster)?;
    let tls = tempfile::tempdir()?;
    let ca = webhook::certificates(tls.path())?;
    let kubeconfig = cluster.service_account_kubeconfig(WEBHOOK_SERVICE_ACCOUNT);
    let admin = cluster.layout.kubeconfig();
    let contenders = [
        Contender {
            name: "kube-retention",
            binary,
            kubeconfig: &kubeconfig,
            extra: &["--check-writers=false"],
        },
        Contender {
            name: "Go peer",
            binary: &args.peer,
            kubeconfig: &admin,
            extra: &[],
        },
    ];
    let load = Load {
        tls: tls.path(),
        ca: &ca,
        requests: requests(),
        rates: &args.rates,
        seconds: args.seconds,
        connections: args.connections,
    };
    if args.only == Some(Part::Memcpy) {
        let without = args.without_memcpy.as_deref();
        let without = existing(without.context("--only memcpy needs --without-memcpy")?)?;
        return memcpy::measure(contenders[0], &without, &load, &args.report).await;
    }
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    if runs(Part::SideBySide) {
        let measured = side_by_side::measure(&contenders, &load).await?;
        report::write_section(&args.report, "webhook", &webhook_section(args, &measured))?;
    }
    if runs(Part::Differential) {
        differential(args, &contenders, &load).await?;
    }
    if !runs(Part::Writers) {
        return Ok(());
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

fn webhook_section(args: &Args, measured: &[side_by_side::Measured]) -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let ratios = match measured {
        [ours, peer] => side_by_side::ratios(ours, peer),
        _ => String::new(),
    };
    format!(
        "## Webhook: kube-retention and a Go peer under the same AdmissionReview load over TLS\n\n\
         Measured with `make bench-webhook` (`bench/src/bin/webhook-bench.rs`, `bench/src/side_by_side.rs`):\n\
         each webhook as its own process, both running in the same run, this load generator as\n\
         another, on the same {cpus}-core machine, over {connections} keep-alive HTTP/1.1 TLS connections,\n\
         connected before each step. The fixed-rate steps alternate between the two webhooks in\n\
         {slice} s slices, pooled per webhook; saturation loads each in turn.\n\
         kube-retention: {ours}, `--check-writers=false` (the peer has no writer check; its\n\
         cost is measured below). The Go peer: {peer}. The mix, round-robin: a Build denied for two\n\
         errors, a ConfigMap stamped with `expires-at` (patch), an annotated Job validated, a finished\n\
         Job re-stamped on UPDATE. Latency counts from when each request was due (open loop), so\n\
         queueing is included. {seconds} s per step and webhook; RSS is VmHWM over the server's whole run.\n\n\
         {}\n\n{ratios}\n",
        side_by_side::table(measured),
        connections = args.connections,
        seconds = args.seconds,
        slice = side_by_side::SLICE_SECONDS,
        peer = peer_build(&args.peer),
        ours = kube_retention_bench::measured_build(),
    )
}

/// The peer's exact build, from the binary itself (`go version -m`): Go, controller-runtime and
/// the build flags.
fn peer_build(peer: &std::path::Path) -> String {
    let Ok(output) = std::process::Command::new("go")
        .args(["version", "-m"])
        .arg(peer)
        .output()
    else {
        return "(go version -m failed)".to_owned();
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let mut parts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, go] if go.starts_with("go1") => parts.push(go.to_string()),
            ["dep", "sigs.k8s.io/controller-runtime", version, ..] => {
                parts.push(format!("controller-runtime {version}"))
            }
            ["build", setting]
                if setting.starts_with("CGO_ENABLED") || setting.starts_with("-") =>
            {
                parts.push(format!("`{setting}`"))
            }
            ["build", flag, rest @ ..] if flag.starts_with("-ldflags") => {
                parts.push(format!("`{flag} {}`", rest.join(" ")))
            }
            _ => {}
        }
    }
    format!(
        "`bench/webhook-peer` built by its build.sh ({})",
        parts.join(", ")
    )
}

/// The same generated AdmissionReviews to both webhooks, freshly started: the
/// `webhook-differential` section.
async fn differential(args: &Args, contenders: &[Contender<'_>], load: &Load<'_>) -> Result<()> {
    let [ours, peer] = contenders else {
        anyhow::bail!("two contenders");
    };
    let (_ours_server, ours_target) = side_by_side::serve(ours, load).await?;
    let (_peer_server, peer_target) = side_by_side::serve(peer, load).await?;
    println!("differential: {} cases", args.differential_cases);
    let findings = differential::run(ours_target, peer_target, args.differential_cases, 8).await?;
    let body = format!(
        "### Differential check: the same AdmissionReviews to both\n\n\
         Measured with `make bench-webhook` (`bench/src/differential/`): Shipwright Builds and\n\
         BuildRuns (naming Builds with TTLs, without, with `atBuildDeletion`, and a missing one),\n\
         annotated ConfigMaps and Jobs (running, complete, failed), CREATE and UPDATE, through\n\
         `/validate` and `/mutate`, every field drawn from values valid, invalid or on the edge\n\
         between the two duration grammars. Compared: allowed, status code, the fields a denial\n\
         names, the object after the patch. Case N is a pure function of N\n\
         (`differential::case(N)`), so each can be replayed.\n\n{}",
        findings.markdown()
    );
    report::write_section(&args.report, "webhook-differential", &body)?;
    let disagreeing: u64 = findings.counts.values().sum();
    println!("differential: {disagreeing} disagreements");
    Ok(())
}
