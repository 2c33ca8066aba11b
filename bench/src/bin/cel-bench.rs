//! `make bench-cel`: what CEL costs, in the model's units and in time. For each expression:
//! the estimate admission makes, the units an evaluation spends on a typical object, and the
//! time one evaluation takes with the object's conversion to CEL (the median of many), hence
//! nanoseconds per unit — the figure the run-time limits are chosen by
//! (`common/src/cel/meter.rs`). Also the conversion alone. Results go into docs/benchmarks/cel.md.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube_retention_bench::cel_copies::{self, median};
use kube_retention_bench::cel_sandbox;
use kube_retention_bench::report;
use kube_retention_common::cel::{
    Budget, COST_LIMIT, Converted, Expect, Expression, TIME_LIMIT, thousands,
};
use serde_json::{Value, json};

const RUNS: usize = 41;

/// A finished Job as the controller sees one, with `annotations` annotations.
fn job(annotations: usize) -> Value {
    let annotations: serde_json::Map<String, Value> = (0..annotations)
        .map(|index| (format!("a{index:03}"), json!("")))
        .collect();
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ci-1234", "namespace": "team-a", "labels": {"team": "a"},
                     "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [
            {"name": "build", "image": "registry.example/builder:1"},
            {"name": "push", "image": "registry.example/pusher:1"}]}}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "succeeded": 1, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    })
}

fn nested(depth: usize) -> String {
    let mut source = String::from("v0 >= 0");
    for level in (0..depth).rev() {
        source = format!("[0,1,2,3,4,5,6,7,8,9].all(v{level}, {source})");
    }
    source
}

struct Row {
    what: String,
    estimate: u64,
    spent: u64,
    outcome: String,
    median: Duration,
}

fn measure(what: &str, source: &str, object: &Value) -> Result<Row> {
    let expression = Expression::compile(source, Expect::Condition)
        .map_err(|error| anyhow::anyhow!("{what}: {error}"))?;
    // The cost limit alone, so that the time is the cost's, not a time limit's.
    let budget = Budget {
        cost: COST_LIMIT,
        time: Duration::MAX,
    };
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let outcome = expression.condition_costing(object, budget);
        times.push(started.elapsed());
        last = Some(outcome);
    }
    let (result, spent) = last.context("no run")?;
    let outcome = match result {
        Ok(value) => value.to_string(),
        Err(error) if error.exceeded().is_some() => "stopped at the limit".to_owned(),
        Err(error) => format!("error: {error}"),
    };
    Ok(Row {
        what: what.to_owned(),
        estimate: expression.estimated_cost(),
        spent,
        outcome,
        median: median(times),
    })
}

fn main() -> Result<()> {
    let typical = job(3);
    let heavy = job(700);
    let cases = [
        ("a label", r#"object.metadata.labels["team"] == "a""#.to_owned(), &typical),
        ("a name prefix", r#"object.metadata.name.startsWith("ci-")"#.to_owned(), &typical),
        (
            "a condition, searched",
            r#"object.status.conditions.exists(c, c.type == "Complete" && c.status == "True")"#
                .to_owned(),
            &typical,
        ),
        (
            "every container's image",
            r#"object.spec.template.spec.containers.all(c, c.image.startsWith("registry.example/"))"#
                .to_owned(),
            &typical,
        ),
        ("five loops of ten, nested (the costliest literal admitted)", nested(5), &typical),
        (
            "two loops over 700 annotations (admitted on 256; stopped)",
            "object.metadata.annotations.all(a, object.metadata.annotations.exists(b, b == a))"
                .to_owned(),
            &heavy,
        ),
    ];
    let mut rows = Vec::new();
    for (what, source, object) in &cases {
        rows.push(measure(what, source, object)?);
    }
    let mut conversions = Vec::new();
    for object in [&typical, &heavy] {
        let times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                let converted = Converted::new(object);
                let took = started.elapsed();
                drop(converted);
                took
            })
            .collect();
        conversions.push(median(times));
    }
    let mut table = String::from(
        "| expression | estimate | units spent | result | time (median) | ns per unit |\n\
         | --- | ---: | ---: | --- | ---: | ---: |\n",
    );
    for row in &rows {
        let per_unit = row.median.as_nanos() as f64 / row.spent.max(1) as f64;
        table.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} µs | {per_unit:.0} |\n",
            row.what,
            thousands(row.estimate),
            thousands(row.spent),
            row.outcome,
            row.median.as_secs_f64() * 1e6
        ));
    }
    let body = format!(
        "## CEL: what an expression costs\n\n\
         Generated by `make bench-cel` (`bench/src/bin/cel-bench.rs`): each expression compiled as\n\
         admission compiles it, then evaluated {RUNS} times on a Job, in the benchmark's release\n\
         build (glibc; the image's static build evaluates alike). *Estimate*: the cost admission\n\
         computes (refused above {limit}); *units spent*: what the run-time meter counted on that\n\
         object. The time includes the meter's charges and converting the object to CEL, which\n\
         alone takes {typical:.1} µs for a typical Job and {heavy:.1} µs for one with 700\n\
         annotations (the controller converts once per object for all of its policies'\n\
         expressions): short expressions are mostly conversion. The long rows give the time a\n\
         unit takes, from which the limits in `common/src/cel/meter.rs` follow: the cost limit of\n\
         {limit} units is some tens of milliseconds, near the {time:?} time limit (lifted\n\
         here, so that the time is the cost's).\n\n\
         {table}",
        limit = thousands(COST_LIMIT),
        time = TIME_LIMIT,
        typical = conversions[0].as_secs_f64() * 1e6,
        heavy = conversions[1].as_secs_f64() * 1e6,
    );
    println!("{body}");
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks");
    report::write_section(&folder, "cel", &body)?;
    let copies = cel_copies::section()?;
    println!("{copies}");
    report::write_section(&folder, "cel-copies", &copies)?;
    let sandbox = sandbox_section()?;
    println!("{sandbox}");
    report::write_section(&folder, "cel-sandbox", &sandbox)
}

/// Objects the sandbox section judges each way.
const SANDBOX_OBJECTS: usize = 100_000;

fn sandbox_section() -> Result<String> {
    let controller = std::env::current_exe()?.with_file_name("kube-retention-controller");
    let (before, after) = cel_sandbox::compare(SANDBOX_OBJECTS, &controller)?;
    let row = |how: &str, judged: &cel_sandbox::Judged| {
        format!(
            "| {how} | {:.2} s | {:.2} s | {:.1} µs |\n",
            judged.wall.as_secs_f64(),
            judged.cpu.as_secs_f64(),
            judged.wall.as_secs_f64() * 1e6 / SANDBOX_OBJECTS as f64
        )
    };
    Ok(format!(
        "## CEL: the evaluator process against in process\n\n\
         Generated by `make bench-cel` (`bench/src/cel_sandbox.rs`): {objects} Jobs judged with a \
         one-label policy (`{source}`), the way the controller's evaluator judges each object: \
         made into the JSON the model reads, then *in process* (the controller before issue 57) \
         converted to CEL and evaluated on the evaluating thread, or *in the evaluator process* \
         (the controller now) the JSON text of what the expression reads of it (its labels) sent to \
         the process the operating system bounds, bound there and evaluated there, a round trip \
         each. In rounds, the two ways taking \
         turns, in this release build (glibc). CPU time is the thread's and the process's \
         together: what a namespace's share of the evaluator is charged, so what sets how fast \
         a namespace's objects are judged.\n\n\
         | judged | wall clock | CPU time | wall clock per object |\n\
         | --- | ---: | ---: | ---: |\n\
         {before}{after}\n\
         In the evaluator process: {wall:.2}× the wall clock and {cpu:.2}× the CPU time of in \
         process (the goal: at most 1.25×).\n",
        objects = thousands(SANDBOX_OBJECTS as u64),
        source = cel_sandbox::ONE_LABEL,
        before = row("in process", &before),
        after = row("in the evaluator process", &after),
        wall = after.wall.as_secs_f64() / before.wall.as_secs_f64(),
        cpu = after.cpu.as_secs_f64() / before.cpu.as_secs_f64(),
    ))
}
