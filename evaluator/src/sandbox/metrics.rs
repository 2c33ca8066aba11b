//! The sandbox's metrics: processes started, how they ended, and expressions stopped for going
//! past a bound.

use kube_retention_common::cel::Overrun;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::process::Ending;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndLabels {
    /// `memory`, `cpu`, `stack` or `crashed` (past a bound, or ended otherwise during a step);
    /// `stuck` (no CPU used for a whole deadline: ended, nobody blamed) or `replaced` (its
    /// life's CPU time spent).
    pub reason: &'static str,
}

#[derive(Debug, Clone, Default)]
pub struct SandboxMetrics {
    pub started: Counter,
    pub ended: Family<EndLabels, Counter>,
    pub stopped: Counter,
}

impl SandboxMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "evaluator_processes_started",
            "CEL evaluator processes started (one at start, one more after each that ended)",
            metrics.started.clone(),
        );
        registry.register(
            "evaluator_processes_ended",
            "CEL evaluator processes that ended during a step, by the bound they went past",
            metrics.ended.clone(),
        );
        registry.register(
            "evaluator_expressions_stopped",
            "Expressions no longer evaluated until their policy or Cleaner changes, for ending the evaluator process twice",
            metrics.stopped.clone(),
        );
        metrics
    }

    pub(super) fn ended(&self, overrun: Option<&Overrun>, stuck: bool, ending: &Ending) {
        let reason = match overrun {
            Some(Overrun::Memory { .. }) => "memory",
            Some(Overrun::Cpu { .. }) => "cpu",
            Some(Overrun::Stack { .. }) => "stack",
            Some(Overrun::Ended { .. }) => "crashed",
            None if stuck => "stuck",
            None => "replaced",
        };
        tracing::warn!(
            reason,
            signal = ending.signal,
            code = ending.code,
            cpu_ms = ending.cpu.as_millis(),
            "the CEL evaluator process ended during a step; another takes its place"
        );
        self.ended.get_or_create(&EndLabels { reason }).inc();
    }
}
