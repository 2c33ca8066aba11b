//! The chaos suite: scenarios that try to make kube-retention delete against intent or keep
//! what is due — races on re-created names, TTLs changed at the last moment, clock skew,
//! SIGKILLs, an API server restart with etcd compacted, DELETEs a policy denies, a webhook
//! stopped under load. Each asserts that nothing wrong was deleted and nothing due was kept.
//!
//! `make test` runs the short form; `make chaos` (`KUBE_RETENTION_CHAOS=long`) the long one,
//! which writes its figures into docs/reliability.md.

mod denied;
mod judge;
mod load;
mod near_expiry;
mod recreate;
mod restarts;
mod webhook;

use std::sync::Mutex;

use libtest_mimic::Trial;

use crate::support::Env;

pub use judge::{Ledger, Verdict};

/// How hard the suite pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Short,
    Long,
}

impl Form {
    pub fn current() -> Self {
        match std::env::var("KUBE_RETENTION_CHAOS").as_deref() {
            Ok("long") => Self::Long,
            _ => Self::Short,
        }
    }

    /// `short` in the short form, `long` in the long one.
    pub fn pick<T>(self, short: T, long: T) -> T {
        match self {
            Self::Short => short,
            Self::Long => long,
        }
    }
}

/// One scenario's figures, as docs/reliability.md lists them.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: &'static str,
    pub objects: usize,
    pub wrong: usize,
    pub missed: usize,
    /// Seconds from an object's deadline to its deletion, 99th percentile.
    pub p99_delay: Option<f64>,
    pub note: String,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// Records `row` for the report, then fails when anything wrong was deleted or due was kept.
pub fn report(row: Row) -> anyhow::Result<()> {
    let outcome = if row.wrong == 0 && row.missed == 0 {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{}: {} wrong deletions, {} missed deletions ({})",
            row.scenario,
            row.wrong,
            row.missed,
            row.note
        ))
    };
    ROWS.lock()
        .map_err(|_| anyhow::anyhow!("report lock"))?
        .push(row);
    outcome
}

pub fn tests(env: &Env) -> Vec<Trial> {
    let mut trials = recreate::tests(env);
    trials.extend(near_expiry::tests(env));
    trials.extend(denied::tests(env));
    trials
}

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    let mut trials = restarts::disruptive_tests(env);
    trials.extend(webhook::disruptive_tests(env));
    trials
}

/// The table of every scenario that ran; in the long form also written to docs/reliability.md.
pub fn write_report(cluster_version: &str) -> anyhow::Result<()> {
    let mut rows = ROWS
        .lock()
        .map_err(|_| anyhow::anyhow!("report lock"))?
        .clone();
    if rows.is_empty() {
        return Ok(());
    }
    rows.sort_by_key(|row| row.scenario);
    let mut table = String::from(
        "| scenario | objects | wrong deletions | missed deletions | p99 delay | notes |\n\
         | --- | ---: | ---: | ---: | ---: | --- |\n",
    );
    for row in &rows {
        let delay = row
            .p99_delay
            .map_or("–".to_owned(), |seconds| format!("{seconds:.2} s"));
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.scenario, row.objects, row.wrong, row.missed, delay, row.note
        ));
    }
    println!("\nchaos ({:?} form):\n{table}", Form::current());
    if Form::current() == Form::Long {
        let document = format!(
            "# Reliability\n\n\
             Written by `make chaos` (the chaos suite's long form, `tests/tests/e2e/chaos`) on the local\n\
             cluster (Kubernetes {cluster_version}, this machine's cores shared by everything); `make test`\n\
             runs the short form. *Wrong* counts deletions the object's last state did not allow (not\n\
             finished, kept, no deadline, or before it) and deletions of objects a scenario says must\n\
             stay; *missed* counts objects still there more than a few seconds after their deadline.\n\
             The p99 delay runs from each object's deadline to the watch event of its deletion; where\n\
             thousands expire together it is the controller's request budget (50 deletions/s by\n\
             default) at work, and where the controller is frozen or killed, the time it was gone.\n\n\
             {table}\n\
             Fuzzing (`make chaos`): the webhook's handler and `Policy::read` each take 1,000,000\n\
             generated inputs (proptest, `PROPTEST_CASES=1000000`) with no panic.\n"
        );
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reliability.md");
        std::fs::write(path, document)?;
    }
    Ok(())
}
