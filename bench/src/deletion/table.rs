//! The `controller` section of docs/benchmarks/controller.md: a row per deletion run, the ratios against the
//! better peer, and how both deleters were run; and the `envelope-ceiling` section: the same
//! runs against the ceiling's.

use super::{Report, Row};
use crate::deleters::Deleter;
use crate::mib;

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn budget_text(budget: Option<u32>) -> String {
    budget.map_or("unlimited".to_owned(), |budget| format!("{budget} req/s"))
}

/// The cells every deletion table begins with: scenario, deleter, Jobs, budget, delay p50, p99
/// and max, and deletions per second.
pub(super) fn timing_cells(row: &Row) -> String {
    format!(
        "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.1} |",
        row.scenario,
        row.deleter.label(),
        row.jobs,
        budget_text(row.budget),
        percentile(&row.delays, 50.0),
        percentile(&row.delays, 99.0),
        row.delays.last().copied().unwrap_or(f64::NAN),
        row.rate,
    )
}

/// CPU seconds per 1,000 deletions of the deleter, kube-apiserver and etcd; "–" where not
/// measured (steady runs).
pub(super) fn cpu_cells(row: &Row) -> [String; 3] {
    let per_thousand = |seconds: f64| format!("{:.2}", seconds * 1000.0 / row.jobs as f64);
    row.cpu.map_or(
        ["–".to_owned(), "–".to_owned(), "–".to_owned()],
        |cpu| {
            [
                per_thousand(cpu.deleter),
                per_thousand(cpu.apiserver),
                per_thousand(cpu.etcd),
            ]
        },
    )
}

pub fn row_text(row: &Row) -> String {
    let per = |key: &str| row.requests.get(key).copied().unwrap_or(0) as f64 / row.jobs as f64;
    let total: usize = row.requests.values().sum();
    format!(
        "{} {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |",
        timing_cells(row),
        total as f64 / row.jobs as f64,
        per("delete jobs"),
        per("get jobs"),
        per("patch jobs"),
        per("create events"),
        mib(row.peak_rss_kib),
    )
}

/// Deletions per second of kube-retention ÷ the better peer's, per scenario.
fn ratios(rows: &[Row], scenarios: &[&str]) -> Vec<String> {
    let mut ratios = Vec::new();
    for &scenario in scenarios {
        let of = |row: &&Row| row.scenario == scenario;
        let ours = rows
            .iter()
            .filter(of)
            .find(|row| row.deleter == Deleter::KubeRetention);
        let best_peer = rows
            .iter()
            .filter(of)
            .filter(|row| row.deleter.is_peer())
            .max_by(|a, b| a.rate.total_cmp(&b.rate));
        if let (Some(ours), Some(peer)) = (ours, best_peer) {
            ratios.push(format!(
                "{scenario}: {:.2}× (against {})",
                ours.rate / peer.rate,
                peer.deleter.label()
            ));
        }
        if let Some(ratio) = ceiling_ratio(rows, scenario) {
            ratios.push(format!("{scenario}: {ratio:.2}× the ceiling's"));
        }
    }
    ratios
}

/// The section's text.
/// `version` is the cluster's Kubernetes release.
pub fn section(
    rows: &[Row],
    scenarios: &[&str],
    target: &Report<'_>,
    version: &str,
) -> anyhow::Result<String> {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    Ok(format!(
        "## Controller: kube-retention against kube-controller-manager's TTL controller\n\n\
         Measured with `make bench-controller` (`bench/src/bin/controller-bench/`) on a private local\n\
         cluster (Kubernetes {version}, this machine's {cpus} cores shared by everything). Each row starts\n\
         its deleter fresh: kube-retention's controller ({build}; `--qps` = the budget, 0 when unlimited),\n\
         or a kube-controller-manager running `ttl-after-finished-controller` and\n\
         `garbage-collector-controller` with `--kube-api-qps` and `--kube-api-burst` = the budget, in\n\
         place of the control plane's own. The TTL controller deletes with foreground propagation, so\n\
         a Job is gone only once the garbage collector has removed its `foregroundDeletion` finalizer:\n\
         in a real cluster both share one kube-controller-manager's client budget, and here too; the\n\
         peer's requests include the garbage collector's. The peer runs with its default 5 workers\n\
         and, in the unlimited burst, also with `--concurrent-ttl-after-finished-syncs={tuned}`. In that\n\
         burst kube-retention also runs with `--events=0s` (one Event per deletion, as before\n\
         Events were aggregated per parent, or per kind in a namespace, over 5 s). In the steady\n\
         scenario it also runs with `--stamp=finished`, which also writes each Job's `expires-at`\n\
         stamp, a PATCH per Job that finishes after admission, against the default `--stamp=never`'s\n\
         one request per deletion, the DELETE. The unlimited burst also runs the ceiling, a deleter with no\n\
         logic (the Envelope section). Every Job carries\n\
         both `retention.dev/ttl-after-finished` and `ttlSecondsAfterFinished`; the benchmark finishes\n\
         Jobs through the status subresource and times each deletion from its expiry to the watch\n\
         event. Requests are counted per client from the API server's audit log\n\
         (`bench/audit-policy.yaml`); kube-retention's include its Events and, with\n\
         `--stamp=finished`, its `expires-at` stamps (PATCH), which it sends only with budget the\n\
         deletions leave; each run waits for its\n\
         deleter's Events to stop (3 s without one) before counting.\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion | DELETE | GET | PATCH | Event | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{rows}\n\n\
         Deletions per second, kube-retention ÷ the better peer (and ÷ the ceiling): {ratios}.\n\n\
         Goals: delay p99 ≤ 1 s at {rate} expiries/s, one request per deletion, ≥ 1.9× the peer's deletions\n\
         per second at equal budget.\n",
        build = crate::measured_build(),
        tuned = crate::deleters::TUNED_WORKERS,
        rows = rows.iter().map(row_text).collect::<Vec<_>>().join("\n"),
        ratios = ratios(rows, scenarios).join(", "),
        rate = target.steady_rate,
    ))
}

/// The `controller-ledger` section: the steady scenario with the deletion ledger off and on.
pub fn ledger_section(rows: &[Row]) -> String {
    let announced: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let announced = row.announced?;
            Some(format!(
                "{}: {announced} of {} deletions announced",
                row.deleter.label(),
                row.jobs
            ))
        })
        .collect();
    format!(
        "## Controller: the deletion ledger's cost\n\n\
         Measured with `make bench-controller BENCH_ARGS='--only ledger'` (the steady scenario of the\n\
         controller section, run twice in the same run): kube-retention as shipped, and with\n\
         `--ledger-sink` pointing at a local sink that acknowledges every CloudEvent at once\n\
         (`bench/src/ledger_sink.rs`), so every deletion is also announced as\n\
         `dev.retention.deleted`. The ledger's events go to the sink, not to the API server: the\n\
         requests per deletion are the API server's, counted from its audit log as in the\n\
         controller section. Not in the default run, which stays within ten minutes.\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion | DELETE | GET | PATCH | Event | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{rows}\n\n\
         {announced}.\n",
        rows = rows.iter().map(row_text).collect::<Vec<_>>().join("\n"),
        announced = announced.join("; "),
    )
}

/// kube-retention's deletions per second ÷ the ceiling's, in `scenario`.
fn ceiling_ratio(rows: &[Row], scenario: &str) -> Option<f64> {
    let rate = |deleter: Deleter| {
        rows.iter()
            .find(|row| row.scenario == scenario && row.deleter == deleter)
            .map(|row| row.rate)
    };
    Some(rate(Deleter::KubeRetention)? / rate(Deleter::Ceiling)?)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn ceiling_row(row: &Row, ratio: Option<f64>) -> String {
    let total: usize = row.requests.values().sum();
    let [deleter, apiserver, etcd] = cpu_cells(row);
    format!(
        "| {} | {} | {:.1} | {} | {:.3} | {:.3} | {:.2} | {deleter} | {apiserver} | {etcd} | {:.1} |",
        row.scenario,
        row.deleter.label(),
        row.rate,
        ratio.map_or("".to_owned(), |ratio| format!("{ratio:.2}")),
        percentile(&row.delays, 50.0),
        percentile(&row.delays, 99.0),
        total as f64 / row.jobs as f64,
        mib(row.peak_rss_kib),
    )
}

/// kube-retention's goal: this fraction of the ceiling's deletions per second, or more.
const CEILING_GOAL: f64 = 0.9;

/// Whether `median` meets [`CEILING_GOAL`], judged unrounded: 0.8955 is not 0.9, whatever two
/// decimals print.
fn ceiling_verdict(median: f64) -> &'static str {
    if median >= CEILING_GOAL {
        "met"
    } else {
        "not met"
    }
}

/// The `envelope-ceiling` section: rounds of the unlimited burst (`burst`), each run by
/// kube-retention and then the ceiling, with the ratio of each round and their median.
pub fn ceiling_section(rows: &[Row], burst: &str) -> String {
    let mut rounds: Vec<&str> = rows.iter().map(|row| row.scenario.as_str()).collect();
    rounds.dedup();
    let ratios: Vec<f64> = rounds
        .iter()
        .filter_map(|round| ceiling_ratio(rows, round))
        .collect();
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let ratio = (row.deleter == Deleter::KubeRetention)
                .then(|| ceiling_ratio(rows, &row.scenario))
                .flatten();
            ceiling_row(row, ratio)
        })
        .collect();
    let jobs = rows.first().map_or(0, |row| row.jobs);
    let each: Vec<String> = ratios.iter().map(|ratio| format!("{ratio:.3}")).collect();
    let median = median(ratios);
    let verdict = ceiling_verdict(median);
    format!(
        "## Envelope\n\n\
         ### The API server's ceiling\n\n\
         Measured with `make bench-controller BENCH_ARGS='--only ceiling'`: the controller section's\n\
         \"{burst}\" ({jobs} Jobs finishing together, no request budget) in {rounds} rounds on one\n\
         private cluster, each run by kube-retention's controller ({build}) and then by\n\
         `ceiling-deleter` (`bench/src/bin/ceiling-deleter.rs`), a deleter with no logic. Once the\n\
         Jobs have finished it lists them (metadata only), and at their expiry it sends each one\n\
         DELETE with uid and resourceVersion preconditions, {concurrency} in flight, reading no\n\
         answer beyond its status: it watches, judges, queues, budgets and records nothing.\n\
         Deletions per second count from the expiry to the last deletion the benchmark's watch\n\
         sees; requests per deletion are the deleter's, from the audit log (the ceiling's include\n\
         its list). Where the time goes: the CPU seconds the deleter, kube-apiserver and etcd used\n\
         from the expiry to the last deletion, per 1,000 deletions (from /proc). The default run\n\
         has the ceiling in its unlimited burst too, one round (the controller section).\n\n\
         | round | deleter | deletions/s | of the ceiling | delay p50 (s) | p99 (s) | requests/deletion | deleter CPU (s/1000) | kube-apiserver CPU (s/1000) | etcd CPU (s/1000) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{lines}\n\n\
         kube-retention ÷ the ceiling, per round: {each}; median **{median:.3}×**. Goal: ≥ \
         {CEILING_GOAL}×: **{verdict}**.\n",
        rounds = rounds.len(),
        build = crate::measured_build(),
        concurrency = crate::deleters::CEILING_CONCURRENCY,
        lines = lines.join("\n"),
        each = each.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::{ceiling_verdict, median};

    #[test]
    fn the_ceiling_goal_is_judged_on_the_unrounded_median() {
        assert_eq!(ceiling_verdict(median(vec![0.94, 0.8955, 0.84])), "not met");
        assert_eq!(ceiling_verdict(median(vec![0.9, 0.95, 0.7])), "met");
        assert_eq!(ceiling_verdict(median(Vec::new())), "not met", "no rounds");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_middle_pair_s_mean() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
