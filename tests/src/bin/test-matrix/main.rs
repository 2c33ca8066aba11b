//! `make test-matrix`: every pinned Kubernetes minor (tests/cluster/kubernetes), oldest first —
//! its build, what its API server enables, the whole end-to-end suite on it, and the as-shipped
//! suite on the oldest and the newest — written to docs/compatibility.md.
//!
//! Each suite runs as `make` runs it (`make e2e KUBERNETES=1.33`, `make test-shipped ...`), so the
//! matrix proves exactly what a developer's `make` does at that minor. A failing minor does not
//! stop the others; the run fails at its end if any did.

mod probe;
mod report;
mod steps;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_retention_e2e::layout::pinned_minors;

#[derive(Parser)]
#[command(about = "The e2e and as-shipped suites on every pinned Kubernetes minor")]
struct Args {
    /// The minors to run, oldest first (default: every one pinned in tests/cluster/kubernetes).
    /// Rows of minors not run this time are kept from the report as they were.
    #[arg(long, value_delimiter = ',')]
    minors: Vec<String>,
    /// The as-shipped suite runs on the oldest and the newest pinned minor; this skips it.
    #[arg(long)]
    no_shipped: bool,
    /// The report, rewritten at the end.
    #[arg(long, default_value = "docs/compatibility.md")]
    report: PathBuf,
    /// Each step's output, one file per minor and step.
    #[arg(long, default_value = "target/matrix")]
    logs: PathBuf,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("test-matrix: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether every step of every minor passed.
fn run(args: Args) -> anyhow::Result<bool> {
    let root = std::path::absolute(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))?;
    let pinned = pinned_minors(&root)?;
    let minors = if args.minors.is_empty() {
        pinned.clone()
    } else {
        args.minors.clone()
    };
    if let Some(unknown) = minors.iter().find(|minor| !pinned.contains(minor)) {
        anyhow::bail!(
            "{unknown} is not pinned: the pinned minors are {}",
            pinned.join(", ")
        );
    }
    let shipped_on = [pinned.first(), pinned.last()];
    let mut rows = Vec::new();
    for minor in &minors {
        let logs = args.logs.join(minor);
        std::fs::create_dir_all(&logs)?;
        println!("== Kubernetes {minor}");
        let shipped = !args.no_shipped && shipped_on.contains(&Some(minor));
        let row = steps::minor(&root, &root.join(&args.report), minor, &logs, shipped)?;
        println!("== Kubernetes {minor}: {}", row.summary());
        rows.push(row);
        // Written after each minor, so a long run that is stopped keeps what it measured.
        report::write(&root.join(&args.report), &pinned, &rows)?;
    }
    println!("written to {}", args.report.display());
    Ok(rows.iter().all(steps::Row::passed))
}
