//! The `peers` section of docs/benchmarks/peers.md: kube-retention against the cleanup tools
//! admins install instead, a row per scenario and deleter, and the goals judged against every
//! peer's row of the same scenario.

use super::Row;
use super::table::{cpu_cells, percentile, timing_cells};
use crate::deleters::Deleter;
use crate::mib;

fn row_text(row: &Row) -> String {
    let in_namespace: usize = row.requests.values().sum();
    let per = |key: &str| row.requests.get(key).copied().unwrap_or(0) as f64 / row.jobs as f64;
    let [deleter, apiserver, etcd] = cpu_cells(row);
    format!(
        "{} {:.2} | {:.2} | {:.2} | {deleter} | {apiserver} | {etcd} | {:.1} |",
        timing_cells(row),
        in_namespace as f64 / row.jobs as f64,
        per("delete jobs"),
        row.all_requests as f64 / row.jobs as f64,
        mib(row.peak_rss_kib),
    )
}

/// A goal, judged for each of kube-retention's rows against each peer's of the same scenario.
struct Goal {
    /// Its column's heading.
    what: &'static str,
    /// Whether kube-retention's figure is where the goal wants it against the peer's.
    met: fn(ours: &Row, peer: &Row) -> bool,
    /// Only at a budget (throughput: unlimited, each deleter is as fast as its own client lets it).
    budgeted_only: bool,
}

const GOALS: [Goal; 3] = [
    Goal {
        what: "delay p99 below the peer's",
        met: |ours, peer| percentile(&ours.delays, 99.0) < percentile(&peer.delays, 99.0),
        budgeted_only: false,
    },
    Goal {
        what: "fewer requests per deletion (all of them, any namespace)",
        met: |ours, peer| ours.all_requests * peer.jobs < peer.all_requests * ours.jobs,
        budgeted_only: false,
    },
    Goal {
        what: "at least the peer's deletions per second at an equal budget",
        met: |ours, peer| ours.rate >= peer.rate,
        budgeted_only: true,
    },
];

/// The goals' table: a line per scenario, kube-retention's run (as installed, or with other
/// flags) and peer, a cell per goal, `**met**`, `not met`, or `–` where the goal does not apply.
fn verdicts(rows: &[Row]) -> Vec<String> {
    let headings: Vec<&str> = GOALS.iter().map(|goal| goal.what).collect();
    let mut lines = vec![
        format!(
            "| scenario | kube-retention | peer | {} |",
            headings.join(" | ")
        ),
        format!("| --- | --- | --- |{}", " --- |".repeat(GOALS.len())),
    ];
    for ours in rows.iter().filter(|row| row.deleter.is_kube_retention()) {
        for peer in rows
            .iter()
            .filter(|row| row.scenario == ours.scenario && !row.deleter.is_kube_retention())
        {
            let cells: Vec<&str> = GOALS
                .iter()
                .map(|goal| {
                    match (
                        goal.budgeted_only && ours.budget.is_none(),
                        (goal.met)(ours, peer),
                    ) {
                        (true, _) => "–",
                        (false, true) => "**met**",
                        (false, false) => "not met",
                    }
                })
                .collect();
            lines.push(format!(
                "| {} | {} | {} | {} |",
                ours.scenario,
                ours.deleter.label(),
                peer.deleter.label(),
                cells.join(" | ")
            ));
        }
    }
    lines
}

/// Where Kyverno's TTL label gave a run's Jobs a longer life than the scenario's, for the time
/// to label them all: "180 s after they finish in burst, budgeted", each such run.
fn labelling_ttls(rows: &[Row]) -> String {
    let ttls: Vec<String> = rows
        .iter()
        .filter(|row| row.deleter == Deleter::KyvernoTtl)
        .filter(|row| {
            rows.iter().any(|other| {
                other.scenario == row.scenario
                    && other.deleter == Deleter::KubeRetention
                    && other.ttl < row.ttl
            })
        })
        .map(|row| format!("{} s after they finish in {}", row.ttl, row.scenario))
        .collect();
    if ttls.is_empty() {
        "no run needed longer".into()
    } else {
        ttls.join(", ")
    }
}

/// The section's text; `version` is the cluster's Kubernetes release.
pub fn section(
    rows: &[Row],
    version: &str,
    target: &super::PeersReport<'_>,
) -> anyhow::Result<String> {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    Ok(format!(
        "## {heading}\n\n\
         Measured with `{command}` (`bench/src/bin/peers-bench.rs`) on a private local\n\
         cluster (Kubernetes {version}, this machine's {cpus} cores shared by everything), one\n\
         deleter at a time, each started fresh, on identical Jobs finished through the status\n\
         subresource and timed from their expiry to the watch event. kube-retention's controller\n\
         ({build}; `--qps` = the budget, 0 when unlimited) reads `retention.dev/ttl-after-finished`\n\
         and, as installed, sends one request per deletion, the DELETE; the unlimited burst also\n\
         runs it with `--stamp=finished`, which stamps each finished Job's deadline (`expires-at`,\n\
         a PATCH) beside it.\n\
         Kyverno {kyverno}'s cleanup controller is built from its Go module\n\
         (`bench/peers/kyverno/go.mod`) and runs as its own debug launcher runs it out of cluster,\n\
         with its CRDs and its chart's RBAC plus Jobs (`bench/peers/kyverno/rbac.yaml`), under a\n\
         client identity of its own, `--clientRateLimitQPS` and `--clientRateLimitBurst` = the\n\
         budget (1,000,000 when unlimited; each of its clients has a limiter of its own). Two ways:\n\
         each Job labelled, as it finishes, `cleanup.kyverno.io/ttl` with its expiry (the label's\n\
         absolute form: a duration counts from creation) and annotated for background propagation,\n\
         with `--ttlReconciliationInterval={interval}s` (1m by default; it only finds the labelled\n\
         kinds, each deletion has a timer of its own); or a `DeletingPolicy` per namespace on the\n\
         finest schedule its documentation gives, `{schedule}` (every minute), whose CEL condition\n\
         holds once a Job's completion is the TTL old. In a burst, the labelled Jobs expire\n\
         later, never sooner than the others: each label passes Kyverno's TTL webhook, which\n\
         first sends {reviews} access reviews under its client's budget, and every Job must be\n\
         labelled before the first expires ({labelling}); delays count from each Job's own\n\
         expiry. Requests\n\
         are counted per client from the API server's audit log (`bench/audit-policy.yaml`) from the first finish to the last deletion:\n\
         those in the Jobs' namespace, and all of them, in any namespace or none (Kyverno's access\n\
         reviews, discovery and lists across namespaces among them). Where the time goes, over\n\
         each burst: the CPU seconds the deleter, kube-apiserver and etcd used from the expiry to\n\
         the last deletion, per 1,000 deletions (from /proc; a steady run's are not read).\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion in the namespace | DELETE | all requests/deletion | deleter CPU (s/1000) | kube-apiserver CPU (s/1000) | etcd CPU (s/1000) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{rows}\n\n\
         Goals, each of kube-retention's runs against each peer's in the same scenario:\n\n{verdicts}\n",
        heading = target.heading,
        command = target.command,
        build = crate::measured_build(),
        kyverno = crate::kyverno::version()?,
        interval = crate::kyverno::TTL_RECONCILIATION_INTERVAL.as_secs(),
        schedule = crate::kyverno::SCHEDULE,
        reviews = crate::kyverno::REVIEWS_PER_CHECK,
        labelling = labelling_ttls(rows),
        rows = rows.iter().map(row_text).collect::<Vec<_>>().join("\n"),
        verdicts = verdicts(rows).join("\n"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(deleter: Deleter, budget: Option<u32>, p99: f64, all_requests: usize, rate: f64) -> Row {
        Row {
            scenario: "burst".into(),
            deleter,
            jobs: 100,
            budget,
            ttl: 30,
            delays: vec![p99],
            rate,
            requests: Default::default(),
            all_requests,
            peak_rss_kib: 0,
            announced: None,
            cpu: None,
        }
    }

    /// The cells of the goals' line for `ours` against `peer`.
    fn cells(verdicts: &[String], ours: Deleter, peer: Deleter) -> Vec<String> {
        let line = verdicts
            .iter()
            .find(|line| {
                line.starts_with(&format!("| burst | {} | {} |", ours.label(), peer.label()))
            })
            .unwrap_or_else(|| panic!("no line for {ours:?} against {peer:?}: {verdicts:#?}"));
        line.trim_matches('|')
            .split(" | ")
            .skip(3)
            .map(|cell| cell.trim().to_owned())
            .collect()
    }

    #[test]
    fn each_goal_is_judged_against_each_peer_of_the_scenario() {
        let rows = [
            row(Deleter::KubeRetention, Some(50), 0.5, 100, 40.0),
            row(Deleter::KyvernoTtl, Some(50), 0.4, 300, 40.0),
            row(Deleter::KyvernoPolicy, Some(50), 30.0, 100, 45.0),
        ];
        let verdicts = verdicts(&rows);
        // The heading, its rule, and a line per peer.
        assert_eq!(verdicts.len(), 2 + 2, "{verdicts:#?}");
        assert_eq!(verdicts[0].matches('|').count(), 3 + GOALS.len() + 1);
        // Equal is at least equal.
        assert_eq!(
            cells(&verdicts, Deleter::KubeRetention, Deleter::KyvernoTtl),
            ["not met", "**met**", "**met**"]
        );
        // Equal is not fewer.
        assert_eq!(
            cells(&verdicts, Deleter::KubeRetention, Deleter::KyvernoPolicy),
            ["**met**", "not met", "not met"]
        );
    }

    #[test]
    fn every_run_of_kube_retention_is_judged_and_none_against_another() {
        let rows = [
            row(Deleter::KubeRetention, Some(50), 0.5, 100, 40.0),
            row(Deleter::KubeRetentionStamped, Some(50), 0.5, 200, 40.0),
            row(Deleter::KyvernoPolicy, Some(50), 30.0, 150, 40.0),
        ];
        let verdicts = verdicts(&rows);
        assert_eq!(verdicts.len(), 2 + 2, "{verdicts:#?}");
        assert_eq!(
            cells(&verdicts, Deleter::KubeRetention, Deleter::KyvernoPolicy)[1],
            "**met**"
        );
        assert_eq!(
            cells(
                &verdicts,
                Deleter::KubeRetentionStamped,
                Deleter::KyvernoPolicy
            )[1],
            "not met"
        );
    }

    #[test]
    fn throughput_is_judged_only_at_a_budget() {
        let rows = [
            row(Deleter::KubeRetention, None, 0.5, 100, 10.0),
            row(Deleter::KyvernoTtl, None, 0.4, 300, 40.0),
        ];
        let verdicts = verdicts(&rows);
        assert_eq!(
            cells(&verdicts, Deleter::KubeRetention, Deleter::KyvernoTtl),
            ["not met", "**met**", "–"]
        );
    }
}
