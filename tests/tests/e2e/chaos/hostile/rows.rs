//! The hostile-tenant scenario's rows in docs/reliability.md: B's p99 delay in each condition,
//! with what A did beside it, and what kube-retention's processes held.

use anyhow::Result;
use kube_retention_e2e::layout::Layout;

use super::super::{Row, Verdict, report};
use super::RATE;
use super::attacks::Held;
use super::tenant::ANNOTATIONS;

/// What the rows say beside B's verdicts.
pub struct Notes<'a> {
    pub count: usize,
    pub reached: usize,
    pub edits: usize,
    pub flooded: usize,
    pub throttled: usize,
    /// A's dry-run ConfigMaps of the flood's size, while its workload only.
    pub requests: usize,
    pub held: &'a Held,
}

/// Reports B's verdicts A quiet, beside A's settings, beside A's workload and beside the
/// hostile A, and the processes' restarts and peak memory.
pub fn report_all(
    [quiet, settings, workload, hostile]: [&Verdict; 4],
    notes: &Notes,
) -> Result<()> {
    let p99 = |verdict: &Verdict| verdict.p99().unwrap_or(0.0);
    let ratio = |over: &Verdict, under: &Verdict| p99(over) / p99(under).max(f64::EPSILON);
    report(Row {
        scenario: "hostile tenant: B's Jobs, A quiet",
        objects: quiet.objects,
        wrong: quiet.wrong.len(),
        missed: quiet.missed.len(),
        p99_delay: quiet.p99(),
        note: format!("{} Jobs expiring at {RATE}/s {}", notes.count, quiet.note()),
    })?;
    report(Row {
        scenario: "hostile tenant: B's Jobs, beside A's settings only",
        objects: settings.objects,
        wrong: settings.wrong.len(),
        missed: settings.missed.len(),
        p99_delay: settings.p99(),
        note: format!(
            "{:.2}× quiet: the policy stopped at its limit over A's Jobs, left alone, and the \
             Cleaners {}",
            ratio(settings, quiet),
            settings.note()
        ),
    })?;
    report(Row {
        scenario: "hostile tenant: B's Jobs, A's workload only",
        objects: workload.objects,
        wrong: workload.wrong.len(),
        missed: workload.missed.len(),
        p99_delay: workload.p99(),
        note: format!(
            "{:.2}× quiet: A edits its Jobs of {ANNOTATIONS} annotations five times a second \
             and sends the API server ConfigMaps of the webhook flood's size, dry run, one \
             after another ({} answered), with no retention settings {}",
            ratio(workload, quiet),
            notes.requests,
            workload.note()
        ),
    })?;
    report(Row {
        scenario: "hostile tenant: B's Jobs, beside the hostile A",
        objects: hostile.objects,
        wrong: hostile.wrong.len(),
        missed: hostile.missed.len(),
        p99_delay: hostile.p99(),
        note: format!(
            "{:.2}× A's workload only, {:.2}× quiet: the same edits under a policy stopped at \
             its limit, Cleaners with sinks at 127.0.0.1 and 169.254.169.254 (which {} \
             connections reached), a Cleaner searching over sixteen loops, one over a \
             megabyte ConfigMap, and Cleaners of sixteen 4 KB conditions sent to the webhook \
             one after another ({} compiled, {} refused uncompiled once A had used its share \
             of the compile time); A made {} edits in all {}",
            ratio(hostile, workload),
            ratio(hostile, quiet),
            notes.reached,
            notes.flooded,
            notes.throttled,
            notes.edits,
            hostile.note()
        ),
    })?;
    let held = notes.held;
    report(Row {
        scenario: "hostile tenant: kube-retention's processes",
        objects: 0,
        wrong: 0,
        missed: 0,
        p99_delay: None,
        note: format!(
            "{} restarts; most memory held since they started: the controller {} MiB (the \
             chart's limit 384 MiB, with its evaluator processes, not counted here), the webhook {} MiB (128 MiB); {}",
            held.restarts,
            held.controller_kib / 1024,
            held.webhook_kib / 1024,
            builds()
        ),
    })?;
    Ok(())
}

/// Which builds of the controller and the webhook ran: the image's (`make chaos`), or the debug
/// builds of `make test`'s short form.
pub fn builds() -> &'static str {
    match Layout::cargo_profile().ends_with("release") {
        true => "the image's static release builds",
        false => "debug builds",
    }
}
