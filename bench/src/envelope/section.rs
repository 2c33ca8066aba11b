//! The `envelope-scale-N` sections of docs/benchmarks/envelope.md (N the Jobs asked for), with each
//! goal said met or not from the figures themselves.

use super::goals::verdicts;
use super::{Figures, TTL_SECONDS, per_job, seconds};
use crate::mib;

fn tracking_rows(figures: &Figures) -> Vec<String> {
    figures
        .tracking
        .iter()
        .map(|reading| {
            let smaller = figures
                .tracking
                .iter()
                .filter(|other| other.deleter == reading.deleter && other.jobs < reading.jobs)
                .max_by_key(|other| other.jobs);
            let growth = smaller.map_or("–".to_owned(), |smaller| {
                per_job(
                    (smaller.jobs, smaller.rss_kib),
                    (reading.jobs, reading.rss_kib),
                )
            });
            format!(
                "| {} | {} | {} | {:.1} | {:.1} | {growth} |",
                reading.deleter.label(),
                reading.jobs,
                seconds(reading.listed),
                mib(reading.rss_kib),
                mib(reading.peak_kib),
            )
        })
        .collect()
}

fn control_plane_rows(figures: &Figures) -> Vec<String> {
    let [tenth, all, end] = figures.control_plane;
    let (small, large) = (figures.smaller, figures.size.jobs);
    let live_heap = tenth.apiserver_live_heap.zip(all.apiserver_live_heap);
    let rows = [
        (
            "kube-apiserver",
            Some((tenth.apiserver.1, all.apiserver.1)),
            format!("{:.0}", mib(end.apiserver.0)),
        ),
        ("kube-apiserver's live heap (Go)", live_heap, "–".to_owned()),
        (
            "etcd",
            Some((tenth.etcd.1, all.etcd.1)),
            format!("{:.0}", mib(end.etcd.0)),
        ),
    ];
    rows.into_iter()
        .filter_map(|(name, readings, peak)| {
            let (tenth, all) = readings?;
            Some(format!(
                "| {name} | {:.0} | {:.0} | {} | {peak} |",
                mib(tenth),
                mib(all),
                per_job((small, tenth), (large, all)),
            ))
        })
        .collect()
}

fn cold_start_rows(figures: &Figures) -> Vec<String> {
    let size = &figures.size;
    let mut tracked = size.jobs;
    figures
        .cold_starts
        .iter()
        .map(|(deleter, start)| {
            let row = format!(
                "| {} | {tracked} | {} | {} req/s | {} | {} | {} | {:.1} | {} | {:.1} | {:.1} |",
                deleter.label(),
                size.tenth(),
                size.budget,
                seconds(start.first_deletion),
                seconds(start.listed),
                seconds(start.last_deletion),
                size.at_budget_pace(),
                start.deleted,
                mib(start.rss_kib),
                mib(start.peak_rss_kib),
            );
            tracked -= start.deleted;
            row
        })
        .collect()
}

/// What ended a cold start early, or kept it from being measured, a paragraph each.
fn ended_or_failed(figures: &Figures) -> String {
    let ended = figures.cold_starts.iter().filter_map(|(deleter, start)| {
        let ended = start.ended.as_ref()?;
        Some(format!("\n**{}: {ended}.**\n", deleter.label()))
    });
    let failed = figures
        .failed
        .iter()
        .map(|(deleter, error)| format!("\n{} could not be measured: {error}\n", deleter.label()));
    ended.chain(failed).collect()
}

/// The section's text.
pub fn section(figures: &Figures) -> String {
    let size = &figures.size;
    format!(
        "### {jobs} Jobs\n\n\
         Measured with `make bench-controller BENCH_ARGS=--huge` (`bench/src/envelope/`), not in\n\
         the default run: {jobs} Jobs (unfinished, each with a {ttl} s TTL in both deleters'\n\
         settings) were created in one namespace, {created:.0} s of creating ({rate:.0} Jobs/s, 32\n\
         requests in flight).{stopped} The control plane's kube-controller-manager was stopped for\n\
         the run: the Jobs have no dependents, and its garbage collector's graph of every Job\n\
         would take memory the larger sizes need.{limit} At {smaller} Jobs and again at {jobs}, each deleter\n\
         started fresh and tracked them (as in the memory section: read 20 s after its start, a\n\
         second more per 10,000 Jobs; \"listed\" is when kube-retention's /readyz first answered 200). Then every\n\
         tenth Job ({tenth}) finished {overdue} s ago while no controller ran, and kube-retention's\n\
         controller ({build}) started cold with a budget of {budget} req/s; after it, another\n\
         tenth finished the same way and kube-controller-manager's TTL controller and garbage\n\
         collector started cold with `--kube-api-qps` = `--kube-api-burst` = {budget}. Times count\n\
         from each start to each deletion as the benchmark's own metadata watch sees it.\n\n\
         | deleter | Jobs | listed (s) | RSS (MiB) | peak RSS (MiB) | RSS growth per Job since the smaller size (bytes) |\n\
         | --- | --- | --- | --- | --- | --- |\n{tracking}\n\n\
         The control plane beside it (resident memory; the peak is over the whole run):\n\n\
         | process | at {smaller} Jobs (MiB) | at {jobs} Jobs (MiB) | growth per Job (bytes) | peak (MiB) |\n\
         | --- | --- | --- | --- | --- |\n{control_plane}\n\n\
         Cold starts with a tenth of the Jobs overdue:\n\n\
         | deleter | Jobs | overdue | budget | first deletion (s) | listed (s) | last deletion (s) | at the budget's pace (s) | deleted | RSS at the end (MiB) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{cold_starts}\n{failed}\n\
         kube-retention's goals at {jobs} Jobs:\n\n{verdicts}\n",
        jobs = size.jobs,
        stopped = figures
            .stopped
            .as_ref()
            .map_or(String::new(), |why| format!(
                " **{target} were asked for; creating {why}.**",
                target = figures.target
            )),
        ttl = TTL_SECONDS,
        limit = size.apiserver_memory_limit.as_ref().map_or(String::new(), |limit| format!(
            " kube-apiserver ran with `GOMEMLIMIT={limit}` (Go's soft memory limit: its garbage \
             collector runs before the heap passes it, not only when the heap has doubled)."
        )),
        overdue = 2 * TTL_SECONDS,
        created = figures.creating,
        rate = size.jobs as f64 / figures.creating,
        tenth = size.tenth(),
        smaller = figures.smaller,
        build = crate::measured_build(),
        budget = size.budget,
        tracking = tracking_rows(figures).join("\n"),
        control_plane = control_plane_rows(figures).join("\n"),
        cold_starts = cold_start_rows(figures).join("\n"),
        failed = ended_or_failed(figures),
        verdicts = verdicts(figures),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deleters::Deleter;
    use crate::restart::ColdStart;

    #[test]
    fn growth_per_job_is_the_difference_over_the_jobs_between() {
        assert_eq!(
            per_job((100_000, 40 * 1024), (1_000_000, 220 * 1024)),
            "210"
        );
        assert_eq!(per_job((100, 1), (100, 2)), "–");
    }

    #[test]
    fn a_run_stopped_short_and_a_deleter_killed_say_so() {
        use super::super::{ControlPlane, Figures, Size};
        use crate::memory::Reading;
        use crate::restart::Ended;
        let reading = |deleter, jobs| Reading {
            deleter,
            jobs,
            rss_kib: 100 * 1024,
            peak_kib: 120 * 1024,
            listed: Some(1.0),
        };
        let start = |deleted, ended| ColdStart {
            first_deletion: Some(0.5),
            listed: None,
            last_deletion: Some(40.0),
            deleted,
            peak_rss_kib: 200 * 1024,
            rss_kib: 150 * 1024,
            ended,
        };
        let plane = ControlPlane {
            apiserver: (4 << 20, 3 << 20),
            apiserver_live_heap: Some(1 << 20),
            etcd: (1 << 20, 1 << 20),
        };
        let figures = Figures {
            size: Size {
                jobs: 700_000,
                budget: 500,
                reserve_kib: 6 << 20,
                apiserver_memory_limit: Some("10GiB".into()),
            },
            target: 1_000_000,
            smaller: 100_000,
            stopped: Some("stopped there: the machine had 5.9 GiB of memory available".into()),
            creating: 1_000.0,
            tracking: vec![
                reading(Deleter::KubeRetention, 100_000),
                reading(Deleter::KubeRetention, 700_000),
            ],
            control_plane: [plane; 3],
            cold_starts: vec![
                (Deleter::KubeRetention, start(70_000, None)),
                (
                    Deleter::Peer,
                    start(
                        10,
                        Some(Ended {
                            after: 300.0,
                            out_of_memory: true,
                            exit: None,
                            last_words: None,
                        }),
                    ),
                ),
            ],
            failed: vec![],
        };
        let text = section(&figures);
        assert!(text.starts_with("### 700000 Jobs\n"), "{text}");
        assert!(
            text.contains(
                "**1000000 were asked for; creating stopped there: the machine had 5.9 GiB"
            ),
            "{text}"
        );
        assert!(text.contains("| process | at 100000 Jobs (MiB) | at 700000 Jobs (MiB) |"));
        assert!(
            text.contains("kube-apiserver ran with `GOMEMLIMIT=10GiB`"),
            "{text}"
        );
        assert!(
            text.contains("| kube-apiserver's live heap (Go) | 1024 | 1024 | 0 | – |"),
            "{text}"
        );
        assert!(text.contains(
            "**kube-controller-manager ttl-after-finished: the process ended 300 s after its \
             start, killed by the kernel's OOM killer; it wrote nothing to its log.**"
        ));
        assert!(
            text.contains("| kube-retention | 700000 | 70000 | 500 req/s |"),
            "{text}"
        );
        assert!(
            text.contains("(last deletion at 40.00 s, 70000 of 70000 deleted"),
            "{text}"
        );
    }

    #[test]
    fn a_cold_start_that_deleted_nothing_says_so() {
        let start = ColdStart {
            first_deletion: None,
            listed: None,
            last_deletion: None,
            deleted: 0,
            peak_rss_kib: 0,
            rss_kib: 0,
            ended: Some(crate::restart::Ended {
                after: 12.4,
                out_of_memory: true,
                exit: Some("killed by signal 9".into()),
                last_words: Some(
                    "F1126 13:09:09 server.go:42] \"error\" err=\"'x' refused\"".into(),
                ),
            }),
        };
        let size = super::super::Size {
            jobs: 1_000,
            budget: 100,
            reserve_kib: 0,
            apiserver_memory_limit: None,
        };
        let text = super::super::cold_start_text(&size, &start);
        assert!(
            text.starts_with("0 of 100 overdue deleted; first – s"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "; the process ended 12 s after its start, killed by the kernel's OOM killer \
                 (killed by signal 9); its log ends: `F1126 13:09:09 server.go:42] \"error\" err=\"'x' refused\"`"
            ),
            "{text}"
        );
    }
}
