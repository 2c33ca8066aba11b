//! `make bench-webhook`: AdmissionReview load over TLS against the release webhook, from this
//! separate process, at fixed rates and then closed-loop to saturation. Reports p50/p99/p99.9
//! latency, throughput and the webhook's peak RSS into docs/benchmarks.md.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hyper::body::Bytes;
use kube_retention_bench::load::{self, Outcome, Target};
use kube_retention_bench::{report, rss_kib};
use kube_retention_certs::CertificateAuthority;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Seconds per fixed-rate step.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Fixed rates to run, requests per second.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000,4000")]
    rates: Vec<u64>,
    /// Connections for the fixed-rate steps and for saturation.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Where to write the results.
    #[arg(long, default_value = "docs/benchmarks.md")]
    report: PathBuf,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn review(operation: &str, group: &str, kind: &str, object: serde_json::Value) -> Bytes {
    let version = if group.is_empty() { "v1" } else { "v1beta1" };
    Bytes::from(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "3c9d2f8e-0000-4000-8000-000000000000",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
            "name": object["metadata"]["name"], "namespace": "bench", "operation": operation,
            "userInfo": {"username": "bench"}, "object": object, "dryRun": false}})
        .to_string(),
    )
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
            review("CREATE", "shipwright.io", "Build", build),
        ),
        ("/mutate", review("CREATE", "", "ConfigMap", config_map)),
        ("/validate", review("CREATE", "batch", "Job", job.clone())),
        ("/mutate", review("UPDATE", "batch", "Job", job)),
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let binary = repo_root().join("target/release/kube-retention-webhook");
    if !binary.is_file() {
        bail!(
            "{} is missing: run `cargo build --release -p kube-retention-webhook`",
            binary.display()
        );
    }
    let dir = tempfile::tempdir()?;
    let ca = CertificateAuthority::generate("bench-ca", time::Duration::days(1))?;
    let serving = ca.issue_serving(&["127.0.0.1"], time::Duration::days(1))?;
    std::fs::write(dir.path().join("tls.crt"), &serving.cert_pem)?;
    std::fs::write(dir.path().join("tls.key"), &serving.key_pem)?;
    // No request in the mix reads a parent object, so the API server is never contacted.
    let kubeconfig = json!({"apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "none", "user": {"token": "unused"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}]});
    std::fs::write(dir.path().join("kubeconfig"), kubeconfig.to_string())?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut webhook = Command::new(&binary)
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!(
            "--tls-cert={}",
            dir.path().join("tls.crt").display()
        ))
        .arg(format!(
            "--tls-key={}",
            dir.path().join("tls.key").display()
        ))
        .arg(format!(
            "--kubeconfig={}",
            dir.path().join("kubeconfig").display()
        ))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .context("starting the webhook")?;
    let outcome = run(&args, &ca, port, webhook.id()).await;
    webhook.kill().ok();
    webhook.wait().ok();
    outcome
}

async fn run(args: &Args, ca: &CertificateAuthority, port: u16, pid: u32) -> Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = x509_parser::pem::parse_x509_pem(ca.certified().cert_pem.as_bytes())
        .map_err(|error| anyhow::anyhow!("CA PEM: {error}"))?
        .1
        .contents;
    roots.add(ca_der.into())?;
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let target = Arc::new(Target {
        address: format!("127.0.0.1:{port}").parse()?,
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
        requests: requests(),
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while load::fixed_rate(target.clone(), 10, Duration::from_secs(1), 1)
        .await
        .errors
        > 0
    {
        if Instant::now() > deadline {
            bail!("the webhook did not answer within 20s");
        }
    }
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
         a finished Job re-stamped on UPDATE. Latency counts from when each request was due\n\
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
    report::write_section(&repo_root().join(&args.report), "webhook", &body)?;
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
