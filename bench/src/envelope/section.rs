//! The `envelope-scale` section of docs/benchmarks.md, with each goal said met or not from the
//! figures themselves.

use super::{Figures, TTL_SECONDS, per_job, seconds};
use crate::deleters::Deleter;
use crate::mib;

/// kube-retention's memory goal at this size, the listing peak included, in MiB.
const MEMORY_GOAL_MIB: f64 = 300.0;
/// The first overdue deletion after a cold start, in seconds.
const FIRST_DELETION_GOAL: f64 = 3.0;
/// How much slower than the budget's pace the catch-up may be and still be "at" it.
const PACE_SLACK: f64 = 1.1;

fn met(holds: bool) -> &'static str {
    if holds { "**met**" } else { "**not met**" }
}

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
    let (small, large) = (figures.size.tenth(), figures.size.jobs);
    [
        (
            "kube-apiserver",
            tenth.apiserver,
            all.apiserver,
            end.apiserver,
        ),
        ("etcd", tenth.etcd, all.etcd, end.etcd),
    ]
    .iter()
    .map(|(name, tenth, all, end)| {
        format!(
            "| {name} | {:.0} | {:.0} | {} | {:.0} |",
            mib(tenth.1),
            mib(all.1),
            per_job((small, tenth.1), (large, all.1)),
            mib(end.0),
        )
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

/// Each goal, met or not, from kube-retention's figures.
fn verdicts(figures: &Figures) -> String {
    let Some((_, ours)) = figures
        .cold_starts
        .iter()
        .find(|(deleter, _)| *deleter == Deleter::KubeRetention)
    else {
        return "kube-retention's cold start did not run.".to_owned();
    };
    let peak = figures
        .tracking
        .iter()
        .filter(|reading| reading.deleter == Deleter::KubeRetention)
        .map(|reading| reading.peak_kib)
        .chain([ours.peak_rss_kib])
        .max()
        .map_or(f64::NAN, mib);
    let first = ours.first_deletion.unwrap_or(f64::INFINITY);
    let all_deleted = ours.deleted == figures.size.tenth();
    let last = ours.last_deletion.unwrap_or(f64::INFINITY);
    let pace = figures.size.at_budget_pace();
    format!(
        "- Memory ≤ {MEMORY_GOAL_MIB:.0} MiB, the listing peak included: {} (highest peak {peak:.1} MiB).\n\
         - First deletion ≤ {FIRST_DELETION_GOAL:.0} s after a cold start: {} ({} s).\n\
         - Catch-up at the budget's pace (within {slack:.0}%): {} (last deletion at {} s, {} of {} \
         deleted, against {pace:.1} s at the pace).",
        met(peak <= MEMORY_GOAL_MIB),
        met(first <= FIRST_DELETION_GOAL),
        seconds(ours.first_deletion),
        met(all_deleted && last <= pace * PACE_SLACK),
        seconds(ours.last_deletion),
        ours.deleted,
        figures.size.tenth(),
        slack = (PACE_SLACK - 1.0) * 100.0,
    )
}

/// The section's text.
pub fn section(figures: &Figures) -> String {
    let size = &figures.size;
    format!(
        "### {jobs} Jobs\n\n\
         Measured with `make bench-controller BENCH_ARGS=--huge` (`bench/src/envelope/`), not in\n\
         the default run: {jobs} Jobs (unfinished, each with a {ttl} s TTL in both deleters'\n\
         settings) were created in one namespace, {created:.0} s of creating ({rate:.0} Jobs/s, 32\n\
         requests in flight). At {tenth} Jobs and again at {jobs}, each deleter started fresh and\n\
         tracked them (as in the memory section: read 20 s after its start, a second more per\n\
         10,000 Jobs; \"listed\" is when kube-retention's /readyz first answered 200). Then every\n\
         tenth Job ({tenth}) finished {overdue} s ago while no controller ran, and kube-retention's\n\
         controller ({build}) started cold with a budget of {budget} req/s; after it, another\n\
         tenth finished the same way and kube-controller-manager's TTL controller and garbage\n\
         collector started cold with `--kube-api-qps` = `--kube-api-burst` = {budget}. Times count\n\
         from each start to each deletion as the benchmark's own metadata watch sees it.\n\n\
         | deleter | Jobs | listed (s) | RSS (MiB) | peak RSS (MiB) | RSS growth per Job since the smaller size (bytes) |\n\
         | --- | --- | --- | --- | --- | --- |\n{tracking}\n\n\
         The control plane beside it (resident memory; the peak is over the whole run):\n\n\
         | process | at {tenth} Jobs (MiB) | at {jobs} Jobs (MiB) | growth per Job (bytes) | peak (MiB) |\n\
         | --- | --- | --- | --- | --- |\n{control_plane}\n\n\
         Cold starts with a tenth of the Jobs overdue:\n\n\
         | deleter | Jobs | overdue | budget | first deletion (s) | listed (s) | last deletion (s) | at the budget's pace (s) | deleted | RSS at the end (MiB) | peak RSS (MiB) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{cold_starts}\n{failed}\n\
         kube-retention's goals at {jobs} Jobs:\n\n{verdicts}\n",
        jobs = size.jobs,
        ttl = TTL_SECONDS,
        overdue = 2 * TTL_SECONDS,
        created = figures.creating,
        rate = size.jobs as f64 / figures.creating,
        tenth = size.tenth(),
        build = crate::measured_build(),
        budget = size.budget,
        tracking = tracking_rows(figures).join("\n"),
        control_plane = control_plane_rows(figures).join("\n"),
        cold_starts = cold_start_rows(figures).join("\n"),
        failed = figures
            .failed
            .iter()
            .map(|(deleter, error)| format!(
                "\n{} could not be measured: {error}\n",
                deleter.label()
            ))
            .collect::<String>(),
        verdicts = verdicts(figures),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn a_goal_is_met_only_when_it_holds() {
        assert_eq!(met(true), "**met**");
        assert_eq!(met(false), "**not met**");
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
            alive: false,
        };
        let size = super::super::Size {
            jobs: 1_000,
            budget: 100,
        };
        let text = super::super::cold_start_text(&size, &start);
        assert!(
            text.starts_with("0 of 100 overdue deleted; first – s"),
            "{text}"
        );
        assert!(text.ends_with("the process had ended"), "{text}");
    }
}
