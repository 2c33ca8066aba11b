//! The chaos suite: scenarios that try to make kube-retention delete against intent or keep
//! what is due — races on re-created names, TTLs changed at the last moment, clock skew,
//! SIGKILLs, an API server restart with etcd compacted, DELETEs a policy denies, a webhook
//! stopped under load. Each asserts that nothing wrong was deleted and nothing due was kept.
//!
//! `make test` runs the short form; `make chaos` (`KUBE_RETENTION_CHAOS=long`) the long one,
//! which writes its figures into docs/reliability.md.

mod denied;
mod hostile;
mod judge;
mod load;
mod near_expiry;
mod recreate;
mod restarts;
mod sink_down;
mod tenants;
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
    trials.extend(sink_down::tests(env));
    trials
}

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    let mut trials = restarts::disruptive_tests(env);
    trials.extend(webhook::disruptive_tests(env));
    trials.extend(hostile::disruptive_tests(env));
    trials.extend(tenants::disruptive_tests(env));
    trials
}

/// How often a scenario lists its objects to see them all gone while it measures: each list is
/// work for the API server whose deletions it times ([`crate::workloads::eventually_every`]).
const LIST_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Where the tenants' sections (fair share, the hostile-tenant scenario) begin in
/// docs/reliability.md.
const TENANTS_SECTION: &str = "## Fair share between tenants";
/// Where the hand-written table of attacks begins in docs/reliability.md, after the hostile
/// tenant's section: kept as written by every run.
const ATTACKS_SECTION: &str = "## Attacks by a namespace editor";
/// Where the archive sink's section begins in docs/reliability.md, after the attacks'.
const ARCHIVE_SECTION: &str = "## The archive sink down";

/// The table of every scenario that ran; in the long form also written to docs/reliability.md.
/// The hostile-tenant rows have a section of their own, so that a long run of that scenario
/// alone (`make chaos CHAOS_FILTER=...`) rewrites its section and keeps the other table, and the
/// other way round.
pub fn write_report(cluster_version: &str) -> anyhow::Result<()> {
    let mut rows = ROWS
        .lock()
        .map_err(|_| anyhow::anyhow!("report lock"))?
        .clone();
    if rows.is_empty() {
        return Ok(());
    }
    rows.sort_by_key(|row| row.scenario);
    let (hostile, others): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|row| {
        TENANTS_FAMILIES
            .iter()
            .any(|family| row.scenario.starts_with(family))
    });
    let (archive, others): (Vec<Row>, Vec<Row>) = others
        .into_iter()
        .partition(|row| row.scenario == sink_down::SCENARIO);
    for (name, rows) in [
        ("chaos", &others),
        ("hostile tenant", &hostile),
        ("archive sink", &archive),
    ] {
        if !rows.is_empty() {
            println!("\n{name} ({:?} form):\n{}", Form::current(), table(rows));
        }
    }
    if Form::current() != Form::Long {
        return Ok(());
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reliability.md");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let (old_main, rest) = match existing.find(TENANTS_SECTION) {
        Some(at) => existing.split_at(at),
        None => (existing.as_str(), ""),
    };
    let (rest, old_archive) = match rest.find(ARCHIVE_SECTION) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (old_tenants, attacks) = match rest.find(ATTACKS_SECTION) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let kept_or =
        |rows: &[Row], old: &str, section: &dyn Fn(&[Row]) -> String| match rows.is_empty() {
            true => old.to_owned(),
            false => section(rows),
        };
    let main = kept_or(&others, old_main, &|rows| {
        main_section(cluster_version, rows)
    });
    let tenants = kept_or(&hostile, old_tenants, &|rows| {
        tenants_section(&tenants_table(rows, old_tenants))
    });
    let archive = kept_or(&archive, old_archive, &archive_section);
    let sections: Vec<&str> = [main.as_str(), &tenants, attacks, &archive]
        .map(str::trim_end)
        .into_iter()
        .filter(|section| !section.is_empty())
        .collect();
    std::fs::write(path, format!("{}\n", sections.join("\n\n")))?;
    Ok(())
}

/// The scenarios whose rows share the tenants' table, each run alone by its own filter.
const TENANTS_FAMILIES: [&str; 2] = ["hostile tenant", "every attack"];

/// The tenants' table: this run's rows, and for each family of [`TENANTS_FAMILIES`] that did not
/// run, its rows as `old` (the section written before) has them.
fn tenants_table(rows: &[Row], old: &str) -> String {
    let mut table = table(rows);
    for family in TENANTS_FAMILIES {
        if rows.iter().any(|row| row.scenario.starts_with(family)) {
            continue;
        }
        let prefix = format!("| {family}");
        for line in old.lines().filter(|line| line.starts_with(&prefix)) {
            table.push_str(line);
            table.push('\n');
        }
    }
    table
}

fn table(rows: &[Row]) -> String {
    let mut table = String::from(
        "| scenario | objects | wrong deletions | missed deletions | p99 delay | notes |\n\
         | --- | ---: | ---: | ---: | ---: | --- |\n",
    );
    for row in rows {
        let delay = row
            .p99_delay
            .map_or("–".to_owned(), |seconds| format!("{seconds:.2} s"));
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.scenario, row.objects, row.wrong, row.missed, delay, row.note
        ));
    }
    table
}

fn main_section(cluster_version: &str, rows: &[Row]) -> String {
    format!(
        "# Reliability\n\n\
         Written by `make chaos` (the chaos suite's long form, `tests/tests/e2e/chaos`) on the local\n\
         cluster (Kubernetes {cluster_version}, this machine's cores shared by everything); `make test`\n\
         runs the short form. *Wrong* counts deletions the object's last state did not allow (not\n\
         finished, kept, no deadline, or before it) and deletions of objects a scenario says must\n\
         stay; *missed* counts objects still there more than a few seconds after their deadline.\n\
         The p99 delay runs from each object's deadline to the watch event of its deletion; where\n\
         thousands expire together it is the controller's request budget (50 deletions/s by\n\
         default) at work, and where the controller is frozen or killed, the time it was gone.\n\n\
         {}\n\
         Fuzzing (`make chaos`): the webhook's handler and `OwnSettings::read` each take 1,000,000\n\
         generated inputs (proptest, `PROPTEST_CASES=1000000`) with no panic.",
        table(rows)
    )
}

/// How the controller shares itself between tenants, and the tenants' scenarios' `table`.
fn tenants_section(table: &str) -> String {
    format!(
        "{TENANTS_SECTION}\n\n\
         The controller is shared by every namespace and sends all its writes (DELETEs, stamp and label\n\
         PATCHes, Events) within one client-side request budget (`--qps`, 50 requests/s by default),\n\
         deletions first, then stamps and labels, then Events. Each of those priorities used to be one\n\
         first-in, first-out queue: a RetentionPolicy whose 100,000 objects fell due together queued\n\
         100,000 deletions ahead of another namespace's single due object, which then waited\n\
         100,000 / qps seconds (33 minutes at 50/s). A Cleaner sent its DELETEs one after another,\n\
         outside the budget. Now the namespaces take turns, served round robin as API Priority and\n\
         Fairness serves flows: one request per namespace in turn; a namespace with nothing queued leaves\n\
         the rotation and one that arrives joins at its back. Another namespace's work goes out within one\n\
         round (as many requests as namespaces with work waiting), and the flood waits behind itself.\n\
         The priorities order each namespace's own work. They once ordered all work first, so another\n\
         namespace's flood of deletions held back a namespace's `RetentionExpiring` notice, due at its\n\
         deadline less `notifyBefore`, by as long as the flood took, past the deadline it warned of.\n\
         Events and Warnings beyond 10,000 waiting are dropped oldest first from the namespace with the\n\
         longest such backlog, and counted (`kube_retention_events_dropped_total`).\n\
         A Cleaner's DELETEs (its targets, a Helm release's objects and records, the Cleaner itself) each\n\
         wait for the same budget. Shown without a cluster by `controller/tests/testsuite/executor_backlog.rs`\n\
         (100,000 deletions in one namespace, then a deletion, a Warning, a stamp and an Event in others,\n\
         each out within the first round; a property test over any interleaving of every priority)\n\
         and `controller/tests/testsuite/budget.rs` (the executor's order of requests,\n\
         and a Cleaner's DELETEs waiting on a budget the executor spent); not measured on a cluster yet:\n\
         the hostile-tenant scenario below loads the controller with CEL and sinks, not with a deletion\n\
         flood.\n\n\
         ## A hostile tenant\n\n\
         Written by `make chaos CHAOS_FILTER=chaos_a_hostile` (the scenario alone, long form, with the\n\
         image's static release controller and webhook, as the benchmarks use).\n\
         Namespace B's Jobs expire at 20 per second in four conditions: namespace A quiet; A's\n\
         settings only — a RetentionPolicy whose `match` admission lets through on the sizes the cost\n\
         estimate assumes (two loops over annotations) over A's Jobs of 700 annotations each, and\n\
         Cleaners whose sinks point at 127.0.0.1 and 169.254.169.254, with listeners there: the\n\
         hostile tenant to the letter; A's workload only (its Jobs edited five times a\n\
         second, and ConfigMaps of the webhook flood's size sent to the API server as dry runs one\n\
         after another, no retention settings); and beside the hostile A — the same edits under the same\n\
         settings, so that every edit is an evaluation stopped at its limit. They run in the order\n\
         quiet, settings, workload, hostile, workload, settings, quiet, the hostile phase twice as\n\
         long (two batches of B's Jobs, each as many as another phase's), so that a drift of the machine's speed lands on every condition alike. Goals: B's p99\n\
         delay under 1 s and within 1.2× of the same run without the hostile settings (beside A's\n\
         settings against A quiet; beside the hostile A against A's workload alone); no connection to\n\
         a denied address; the hostile policy `Ready=False`, `CostLimitExceeded`, and none of A's Jobs\n\
         deleted. A's settings also hold a Cleaner whose monotonic search runs sixteen loops over A's\n\
         Jobs, one over every ConfigMap of A (one of them a megabyte) and one whose condition stops at\n\
         its limit (`Ready=False` too); while hostile, Cleaners of sixteen 4 KB conditions are sent to\n\
         the webhook one after another, a tenth of a second apart, most of them refused uncompiled\n\
         once A has used its share of the webhook's compile time. Neither the controller nor the webhook may restart or hold\n\
         more memory than the chart allows (384 MiB for the controller and its evaluator processes,\n\
         128 MiB for the webhook). The workload row against the quiet one is what A's edits and requests alone cost B through\n\
         the API server and etcd the tenants share, with kube-retention given nothing to evaluate or\n\
         compile; the hostile row against it is what kube-retention's answer to A costs B. The policy's\n\
         evaluations take at most A's share of the evaluator's time (a twentieth of a core,\n\
         `evaluator/src/lib.rs`). On this two-core machine everything (API server, etcd,\n\
         kube-controller-manager, webhook, controller and the test) shares the same cores.\n\n\
         The rows \"every attack at once\" are written by `make chaos CHAOS_FILTER=chaos_every_attack`\n\
         (the scenario alone, long form, the image's builds; `make test` runs its short form): issue 57's\n\
         reproduced attacks at once, from namespace A and a pod's address, with generated variants.\n\
         Copying RetentionPolicies (list and map literals of `object`, `object.spec`,\n\
         `object.spec.template`, tens of copies) over A's Jobs of about 800 KB, a new variant every few\n\
         seconds; a 1.4 MB Job updated eight at a time; thousands of idle HTTP/2 connections and 128\n\
         slow bodies sent to the webhook from one address while a policy only the webhook can refuse is\n\
         written every two seconds; 200 deletions announced to a closed port; a burst of 10,001\n\
         ConfigMaps its own approved Cleaner deletes until A's namespace breaker opens (2,500 in 10\n\
         minutes, above B's 2,000). Beside them B's Jobs expire ten\n\
         a second. Goals: each of B's Jobs deleted within 3 s of its deadline and none wrongly; every bad\n\
         policy refused by the webhook itself (not by `failurePolicy`); each deletion of a quiet\n\
         namespace announced to its sink and to the admin's `--ledger-sink`; A's breaker open and no\n\
         other; the copying policies `Ready=False` saying which limit; neither process restarted (the\n\
         controller's evaluator processes may be replaced), the controller's peak with its evaluator's\n\
         within 384 MiB and the webhook's within 128 MiB.\n\n\
         {table}"
    )
}

/// The archive sink's scenario: what it shows, and its table.
fn archive_section(rows: &[Row]) -> String {
    format!(
        "{ARCHIVE_SECTION}\n\n\
         Written by `make chaos CHAOS_FILTER=chaos_the_archive` (the scenario alone, long form). A\n\
         RetentionPolicy with `archiveBeforeDelete` and a `sink` that answers 503 while its Jobs fall\n\
         due, then 202. *Wrong* counts deletions without an acknowledgement of the Job's\n\
         `dev.retention.deleted` event before them (the sink's answer before the watch's deletion\n\
         event) and deletions during the outage; *missed* counts Jobs still there after it. The p99\n\
         delay runs from the sink's return: every deadline passed during the outage. Each archive is\n\
         one GET, the event, and the DELETE.\n\n\
         {}",
        table(rows)
    )
}
