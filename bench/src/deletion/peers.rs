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

/// A goal, judged for kube-retention's row against each peer's of the same scenario.
struct Goal {
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
        what: "fewer requests per deletion than the peer (all of them, any namespace)",
        met: |ours, peer| ours.all_requests * peer.jobs < peer.all_requests * ours.jobs,
        budgeted_only: false,
    },
    Goal {
        what: "at least the peer's deletions per second at an equal budget",
        met: |ours, peer| ours.rate >= peer.rate,
        budgeted_only: true,
    },
];

/// Each goal's verdict, per scenario and peer: `met` or `not met`.
fn verdicts(rows: &[Row]) -> Vec<String> {
    let mut verdicts = Vec::new();
    for goal in &GOALS {
        for ours in rows
            .iter()
            .filter(|row| row.deleter == Deleter::KubeRetention)
        {
            if goal.budgeted_only && ours.budget.is_none() {
                continue;
            }
            for peer in rows
                .iter()
                .filter(|row| row.scenario == ours.scenario && row.deleter != ours.deleter)
            {
                let verdict = if (goal.met)(ours, peer) {
                    "met"
                } else {
                    "not met"
                };
                verdicts.push(format!(
                    "- {}, {}: {}: **{verdict}**",
                    ours.scenario,
                    peer.deleter.label(),
                    goal.what
                ));
            }
        }
    }
    verdicts
}

/// The section's text; `version` is the cluster's Kubernetes release.
pub fn section(rows: &[Row], version: &str) -> anyhow::Result<String> {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    Ok(format!(
        "## Peers: kube-retention against Kyverno's cleanup controller\n\n\
         Measured with `make bench-peers` (`bench/src/bin/peers-bench.rs`) on a private local\n\
         cluster (Kubernetes {version}, this machine's {cpus} cores shared by everything), one\n\
         deleter at a time, each started fresh, on identical Jobs finished through the status\n\
         subresource and timed from their expiry to the watch event. kube-retention's controller\n\
         ({build}; `--qps` = the budget, 0 when unlimited) reads `retention.dev/ttl-after-finished`.\n\
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
         later, {labelling} s after they finish for 1,000 (30 s and 0.15 s a Job, never sooner\n\
         than the others): each label passes Kyverno's TTL webhook, and every Job must be\n\
         labelled before the first expires; delays count from each Job's own expiry. Requests\n\
         are counted per client from the API server's audit log (`bench/audit-policy.yaml`) from the first finish to the last deletion:\n\
         those in the Jobs' namespace, and all of them, in any namespace or none (Kyverno's access\n\
         reviews, discovery and lists across namespaces among them). Where the time goes, over\n\
         each burst: the CPU seconds the deleter, kube-apiserver and etcd used from the expiry to\n\
         the last deletion, per 1,000 deletions (from /proc; a steady run's are not read).\n\n\
         | scenario | deleter | Jobs | budget | delay p50 (s) | p99 (s) | max (s) | deletions/s | requests/deletion in the namespace | DELETE | all requests/deletion | deleter CPU (s/1000) | kube-apiserver CPU (s/1000) | etcd CPU (s/1000) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{rows}\n\n\
         Goals, kube-retention against each peer:\n\n{verdicts}\n",
        build = crate::measured_build(),
        kyverno = crate::kyverno::version()?,
        interval = crate::kyverno::TTL_RECONCILIATION_INTERVAL.as_secs(),
        schedule = crate::kyverno::SCHEDULE,
        labelling = crate::kyverno::labelling_time(1_000),
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
            delays: vec![p99],
            rate,
            requests: Default::default(),
            all_requests,
            peak_rss_kib: 0,
            announced: None,
            cpu: None,
        }
    }

    #[test]
    fn each_goal_is_judged_against_each_peer_of_the_scenario() {
        let rows = [
            row(Deleter::KubeRetention, Some(50), 0.5, 100, 40.0),
            row(Deleter::KyvernoTtl, Some(50), 0.4, 300, 40.0),
            row(Deleter::KyvernoPolicy, Some(50), 30.0, 100, 45.0),
        ];
        let verdicts = verdicts(&rows);
        assert_eq!(verdicts.len(), 6, "{verdicts:#?}");
        let said = |peer: Deleter, goal: &str| {
            verdicts
                .iter()
                .find(|line| line.contains(&peer.label()) && line.contains(goal))
                .cloned()
                .unwrap_or_default()
        };
        assert!(said(Deleter::KyvernoTtl, "delay p99").ends_with("**not met**"));
        assert!(said(Deleter::KyvernoPolicy, "delay p99").ends_with("**met**"));
        assert!(said(Deleter::KyvernoTtl, "fewer requests").ends_with("**met**"));
        // Equal is not fewer.
        assert!(said(Deleter::KyvernoPolicy, "fewer requests").ends_with("**not met**"));
        // Equal is at least equal.
        assert!(said(Deleter::KyvernoTtl, "deletions per second").ends_with("**met**"));
        assert!(said(Deleter::KyvernoPolicy, "deletions per second").ends_with("**not met**"));
    }

    #[test]
    fn throughput_is_judged_only_at_a_budget() {
        let rows = [
            row(Deleter::KubeRetention, None, 0.5, 100, 10.0),
            row(Deleter::KyvernoTtl, None, 0.4, 300, 40.0),
        ];
        let verdicts = verdicts(&rows);
        assert_eq!(verdicts.len(), 2, "{verdicts:#?}");
        assert!(
            verdicts
                .iter()
                .all(|line| !line.contains("deletions per second"))
        );
    }
}
