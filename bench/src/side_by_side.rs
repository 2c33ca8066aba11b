//! The `webhook` section of `make bench-webhook`: kube-retention's webhook and the Go peer
//! (`bench/webhook-peer`, controller-runtime's admission package and TLS server) under the same
//! open-loop load over TLS, one after the other in the same run, and the ratios against the
//! issue's goals. Absolute figures on a shared two-core machine move between runs; the ratios of
//! two servers measured minutes apart on the same machine are what count.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use hyper::body::Bytes;

use crate::load::{self, Outcome, Target};
use crate::webhook::{self, Webhook};
use crate::{mib, rss_kib, rss_split_kib};

/// One server under test.
#[derive(Clone, Copy)]
pub struct Contender<'a> {
    pub name: &'static str,
    pub binary: &'a Path,
    pub kubeconfig: &'a Path,
    pub extra: &'a [&'a str],
}

/// What the load steps are.
pub struct Load<'a> {
    pub tls: &'a Path,
    pub ca: &'a kube_retention_certs::CertificateAuthority,
    pub requests: Vec<(&'static str, Bytes)>,
    pub rates: &'a [u64],
    pub seconds: u64,
    pub connections: usize,
}

/// A contender's figures: each fixed rate, then saturation, and its memory.
pub struct Measured {
    pub name: &'static str,
    pub steps: Vec<(String, Outcome)>,
    pub idle_mib: f64,
    pub peak_mib: f64,
    /// After the run: anonymous memory, and pages of mapped files.
    pub anonymous_mib: f64,
    pub file_mib: f64,
}

impl Measured {
    pub fn step(&self, label: &str) -> Option<&Outcome> {
        self.steps
            .iter()
            .find(|(name, _)| name == label)
            .map(|(_, outcome)| outcome)
    }

    pub fn saturation(&self) -> Option<&Outcome> {
        self.steps.last().map(|(_, outcome)| outcome)
    }
}

/// Starts `contender` and waits until it answers the load's requests.
pub async fn serve(contender: &Contender<'_>, load: &Load<'_>) -> Result<(Webhook, Arc<Target>)> {
    let server = Webhook::start(
        contender.binary,
        load.tls,
        contender.kubeconfig,
        contender.extra,
    )?;
    let target = webhook::target(load.ca, server.port, load.requests.clone())?;
    webhook::wait_until_serving(&target)
        .await
        .with_context(|| format!("{} did not start serving", contender.name))?;
    Ok((server, target))
}

/// The fixed-rate steps alternate between the contenders in slices of this many seconds, so
/// that whatever else the shared machine does in a step falls on both alike; each contender's
/// slices of a step are pooled into one histogram.
pub const SLICE_SECONDS: u64 = 2;

/// Starts every contender, warms each up, runs the fixed-rate steps in alternating slices, then
/// saturates each in turn.
pub async fn measure(contenders: &[Contender<'_>], load: &Load<'_>) -> Result<Vec<Measured>> {
    let mut running = Vec::new();
    for contender in contenders {
        let (server, target) = serve(contender, load).await?;
        let (_, idle) = rss_kib(server.pid()).context("RSS")?;
        running.push((contender.name, server, target, idle));
    }
    for (name, _, target, _) in &running {
        println!("{name}: warming up");
        load::fixed_rate(
            target.clone(),
            500,
            Duration::from_secs(2),
            load.connections,
        )
        .await;
    }
    let slices = (load.seconds / SLICE_SECONDS).max(1);
    let slice = Duration::from_secs(load.seconds / slices);
    let mut steps: Vec<Vec<(String, Outcome)>> = running.iter().map(|_| Vec::new()).collect();
    for &rate in load.rates {
        let mut pooled: Vec<Option<Outcome>> = running.iter().map(|_| None).collect();
        for _ in 0..slices {
            for ((_, _, target, _), pool) in running.iter().zip(&mut pooled) {
                let outcome = load::fixed_rate(target.clone(), rate, slice, load.connections).await;
                match pool {
                    Some(pool) => pool.pool(outcome),
                    None => *pool = Some(outcome),
                }
            }
        }
        for ((name, ..), (outcome, steps)) in running.iter().zip(pooled.into_iter().zip(&mut steps))
        {
            let Some(outcome) = outcome else { continue };
            println!("{name}: {rate} req/s: p99 {:.3} ms", outcome.millis(99.0));
            steps.push((format!("{rate} req/s"), outcome));
        }
    }
    let mut measured = Vec::new();
    for ((name, server, target, idle), mut steps) in running.into_iter().zip(steps) {
        let outcome = load::saturate(
            target.clone(),
            Duration::from_secs(load.seconds),
            load.connections,
        )
        .await;
        println!("{name}: saturation {:.0} req/s", outcome.throughput());
        steps.push((
            format!("saturation ({} connections)", load.connections),
            outcome,
        ));
        let pid = server.pid();
        let (peak, _) = rss_kib(pid).context("RSS")?;
        let (anonymous, file) = rss_split_kib(pid).context("RSS")?;
        measured.push(Measured {
            name,
            steps,
            idle_mib: mib(idle),
            peak_mib: mib(peak),
            anonymous_mib: mib(anonymous),
            file_mib: mib(file),
        });
    }
    Ok(measured)
}

/// The side-by-side table: each step with both servers in adjacent rows.
pub fn table(measured: &[Measured]) -> String {
    let mut rows = vec![
        "| load | server | completed | errors | throughput (req/s) | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) |".to_owned(),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    let Some(first) = measured.first() else {
        return String::new();
    };
    for (label, _) in &first.steps {
        for server in measured {
            let Some(outcome) = server.step(label) else {
                continue;
            };
            rows.push(format!(
                "| {label} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
                server.name,
                outcome.completed,
                outcome.errors,
                outcome.throughput(),
                outcome.millis(50.0),
                outcome.millis(99.0),
                outcome.millis(99.9),
                outcome.latency.max() as f64 / 1000.0,
            ));
        }
    }
    rows.join("\n")
}

/// The goals as ratios of `ours` against `peer`, each with whether it is met.
pub fn ratios(ours: &Measured, peer: &Measured) -> String {
    let mut lines = vec![
        "| goal | kube-retention | Go peer | ratio | met |".to_owned(),
        "| --- | --- | --- | --- | --- |".to_owned(),
    ];
    let met = |ok: bool| if ok { "yes" } else { "**no**" };
    if let (Some(a), Some(b)) = (ours.saturation(), peer.saturation()) {
        let ratio = a.throughput() / b.throughput();
        lines.push(format!(
            "| saturation ≥ 2× the peer | {:.0} req/s | {:.0} req/s | {ratio:.2}× | {} |",
            a.throughput(),
            b.throughput(),
            met(ratio >= 2.0)
        ));
    }
    if let (Some(a), Some(b)) = (ours.step("1000 req/s"), peer.step("1000 req/s")) {
        let ratio = a.millis(99.0) / b.millis(99.0);
        lines.push(format!(
            "| p99 at 1,000 req/s ≤ ½ the peer's | {:.3} ms | {:.3} ms | {ratio:.2}× | {} |",
            a.millis(99.0),
            b.millis(99.0),
            met(ratio <= 0.5)
        ));
    }
    let ratio = ours.peak_mib / peer.peak_mib;
    lines.push(format!(
        "| peak RSS ≤ ⅓ of the peer's | {:.1} MiB | {:.1} MiB | {ratio:.2}× | {} |",
        ours.peak_mib,
        peer.peak_mib,
        met(ratio <= 1.0 / 3.0)
    ));
    lines.push(format!(
        "| RSS idle after start (no goal) | {:.1} MiB | {:.1} MiB | {:.2}× | |",
        ours.idle_mib,
        peer.idle_mib,
        ours.idle_mib / peer.idle_mib
    ));
    for (what, a, b) in [
        (
            "of it after the run: anonymous (heap, stacks; no goal)",
            ours.anonymous_mib,
            peer.anonymous_mib,
        ),
        (
            "of it after the run: mapped files, mostly the executable (no goal)",
            ours.file_mib,
            peer.file_mib,
        ),
    ] {
        lines.push(format!(
            "| RSS {what} | {a:.1} MiB | {b:.1} MiB | {:.2}× | |",
            a / b
        ));
    }
    lines.join("\n")
}
