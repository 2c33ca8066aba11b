//! The deletion scenarios of `make bench-controller`: Jobs finishing steadily or all at once,
//! each scenario run once per deleter, fresh — kube-retention's controller, and
//! kube-controller-manager's ttl-after-finished controller and garbage collector (which finishes
//! its foreground deletions) with their default workers and, in the unlimited burst, with more —
//! timed from each Job's expiry to the watch event, with requests counted from the audit log.

use anyhow::Result;
use kube_retention_e2e::LocalCluster;

use crate::deleters::Deleter;
use crate::report;

mod audit;
mod cpu;
mod peers;
mod scenario;
mod table;

pub use audit::{Audited, audit};
pub use cpu::Cpu;
pub use scenario::{Scenario, Shape};

pub struct Row {
    scenario: String,
    deleter: Deleter,
    jobs: usize,
    budget: Option<u32>,
    /// Seconds from each Job's finish to its expiry in this deleter's run.
    ttl: u32,
    delays: Vec<f64>,
    rate: f64,
    requests: std::collections::BTreeMap<String, usize>,
    /// Every request of the deleter's from the first finish to the last deletion, in any
    /// namespace or none.
    all_requests: usize,
    peak_rss_kib: u64,
    /// Deletions the ledger's sink acknowledged (`--ledger-sink` runs only).
    announced: Option<usize>,
    /// Where the CPU went from a burst's expiry to its last deletion (bursts only).
    cpu: Option<Cpu>,
}

/// Where the section goes and what it states as its goal.
pub struct Report<'a> {
    pub file: &'a std::path::Path,
    pub steady_rate: usize,
}

/// Runs every scenario with each of its deleters and writes the `controller` section.
pub async fn run(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
    target: &Report<'_>,
) -> Result<()> {
    let rows = rows(cluster, client, scenarios).await?;
    let names: Vec<&str> = scenarios
        .iter()
        .map(|scenario| scenario.name.as_str())
        .collect();
    report::write_section(
        target.file,
        "controller",
        &table::section(&rows, &names, target, &cluster.layout.kubernetes_release()?)?,
    )?;
    println!("written to {}", target.file.display());
    Ok(())
}

/// Where the peers' section goes: its folder, its name, its heading and the command that
/// writes it.
pub struct PeersReport<'a> {
    pub file: &'a std::path::Path,
    pub section: &'a str,
    pub heading: &'a str,
    pub command: &'a str,
}

/// Runs every scenario with each of its deleters and writes the peers' section.
pub async fn run_peers(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
    target: &PeersReport<'_>,
) -> Result<()> {
    let rows = rows(cluster, client, scenarios).await?;
    report::write_section(
        target.file,
        target.section,
        &peers::section(&rows, &cluster.layout.kubernetes_release()?, target)?,
    )?;
    println!("written to {}", target.file.display());
    Ok(())
}

/// Runs `scenario` with the ledger off and on (`--only ledger`) and writes the
/// `controller-ledger` section.
pub async fn run_ledger(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenario: Scenario,
    target: &Report<'_>,
) -> Result<()> {
    let rows = rows(cluster, client, std::slice::from_ref(&scenario)).await?;
    report::write_section(
        target.file,
        "controller-ledger",
        &table::ledger_section(&rows),
    )?;
    println!("written to {}", target.file.display());
    Ok(())
}

/// Runs `burst` (kube-retention, then the ceiling) `rounds` times (`--only ceiling`) and writes
/// the `envelope-ceiling` section: a ratio per round, as the pace varies from run to run here.
pub async fn run_ceiling(
    cluster: &LocalCluster,
    client: &kube::Client,
    burst: Scenario,
    rounds: usize,
    file: &std::path::Path,
) -> Result<()> {
    let scenarios: Vec<Scenario> = (1..=rounds)
        .map(|round| Scenario {
            name: format!("round {round}"),
            deleters: vec![Deleter::KubeRetention, Deleter::Ceiling],
            ..burst.clone()
        })
        .collect();
    let rows = rows(cluster, client, &scenarios).await?;
    let section = table::ceiling_section(&rows, &burst.name);
    report::write_section(file, "envelope-ceiling", &section)?;
    println!("written to {}", file.display());
    Ok(())
}

/// A row per scenario and deleter, each run fresh.
async fn rows(
    cluster: &LocalCluster,
    client: &kube::Client,
    scenarios: &[Scenario],
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        for &deleter in &scenario.deleters {
            println!(
                "{}: {} ({} Jobs, {})",
                scenario.name,
                deleter.label(),
                scenario.jobs,
                table::budget_text(scenario.budget)
            );
            let started = std::time::Instant::now();
            let row = scenario::run(cluster, client, index, scenario, deleter).await?;
            println!(
                "{} ({:.0} s)",
                table::row_text(&row),
                started.elapsed().as_secs_f64()
            );
            rows.push(row);
        }
    }
    Ok(rows)
}
