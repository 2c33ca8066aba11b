//! What evaluating in the controller's evaluator process costs against evaluating in process,
//! side by side in one run: judging `objects` Jobs with a one-label policy, the way the
//! controller's evaluator judges each object — the object made into the JSON the model reads,
//! then, in process (as the controller did before issue 57), converted to CEL and its `match`
//! evaluated on the evaluator's thread; in the sandbox (as it does now), its JSON text sent to
//! the evaluator process, bound there and its `match` evaluated there, one round trip per
//! object. Both timed whole (wall clock) and in CPU time (the thread's, and the process's as
//! it reports it: what the namespace's share is charged).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use cpu_time::ThreadTime;
use kube::api::DynamicObject;
use kube_retention_common::cel::{Converted, Expect, Expression, InProcess, Interpreter};
use kube_retention_common::kinds::Resource;
use kube_retention_common::model::object_value;
use kube_retention_evaluator::{Limits, Program, Sandbox, SandboxMetrics};
use serde_json::{Value, json};

/// The policy's `match`: one label.
pub const ONE_LABEL: &str = r#"object.metadata.labels["tier"] == "batch""#;

/// How one way of judging went.
#[derive(Debug, Clone, Copy)]
pub struct Judged {
    pub wall: Duration,
    /// The evaluating thread's CPU time, and the evaluator process's.
    pub cpu: Duration,
    pub matched: usize,
}

fn job(index: usize) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("ci-{index}"), "namespace": "team-a",
                     "labels": {"tier": "batch", "team": "a"},
                     "annotations": {"example.com/owner": "team-a"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "build", "image": "registry.example/builder:1"}]}}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    })
}

/// `objects` Jobs judged in process and in the sandbox (the controller binary at `controller`,
/// its hidden subcommand), interleaved in rounds so that a drift of the machine lands on both.
pub fn compare(objects: usize, controller: &Path) -> Result<(Judged, Judged)> {
    let resource = Resource::new("batch", "v1", "Job", "jobs");
    let jobs: Vec<DynamicObject> = (0..objects)
        .map(|index| serde_json::from_value(job(index)))
        .collect::<Result<_, _>>()?;
    let expression = Expression::compile(ONE_LABEL, Expect::Condition)
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    ensure!(
        controller.is_file(),
        "{} is not built",
        controller.display()
    );
    let mut sandbox = Sandbox::new(
        Program {
            path: controller.to_owned(),
            args: vec!["evaluate".into()],
        },
        Limits::default(),
        SandboxMetrics::default(),
    );
    let rounds = 5;
    let mut before = Judged::zero();
    let mut after = Judged::zero();
    for round in 0..rounds {
        let slice = &jobs[round * objects / rounds..(round + 1) * objects / rounds];
        before.add(timed(|| {
            let mut matched = 0;
            for object in slice {
                let value = object_value(&resource, object).context("the model's JSON")?;
                let converted = Converted::new(&value)?;
                if InProcess.condition(&expression, converted.variables(), None)? {
                    matched += 1;
                }
            }
            Ok((matched, Duration::ZERO))
        })?);
        after.add(timed(|| {
            let mut matched = 0;
            for object in slice {
                let value = object_value(&resource, object).context("the model's JSON")?;
                let read = expression.reads().project(&value);
                let bound = sandbox.object(serde_json::to_vec(&read)?);
                if sandbox.condition(&expression, &bound, None)? {
                    matched += 1;
                }
            }
            Ok((matched, sandbox.take_cpu()))
        })?);
    }
    ensure!(
        before.matched == objects && after.matched == objects,
        "every Job matches: {before:?} {after:?}"
    );
    Ok((before, after))
}

impl Judged {
    fn zero() -> Self {
        Self {
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            matched: 0,
        }
    }

    fn add(&mut self, other: Judged) {
        self.wall += other.wall;
        self.cpu += other.cpu;
        self.matched += other.matched;
    }
}

/// Runs `judge`, which answers how many matched and the CPU time it spent elsewhere.
fn timed(judge: impl FnOnce() -> Result<(usize, Duration)>) -> Result<Judged> {
    let started = Instant::now();
    let thread = ThreadTime::now();
    let (matched, elsewhere) = judge()?;
    Ok(Judged {
        wall: started.elapsed(),
        cpu: thread.elapsed() + elsewhere,
        matched,
    })
}
