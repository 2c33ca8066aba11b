//! The Cleaners' metrics, registered with the controller's.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WhatLabels {
    pub what: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Default)]
pub struct CleanerMetrics {
    pub evaluations: Family<OutcomeLabels, Counter>,
    pub deletions: Family<WhatLabels, Counter>,
    pub cel_errors: Counter,
    pub sink_failures: Counter,
    pub sink_refused: Counter,
    pub lists: Family<KindLabels, Counter>,
}

impl CleanerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "cleaner_evaluations",
            "Cleaner evaluations, by outcome (too_early, waiting, clean, cel_error, problem)",
            metrics.evaluations.clone(),
        );
        registry.register(
            "cleaner_deletions",
            "What Cleaners deleted: targets (object) and Helm releases (release)",
            metrics.deletions.clone(),
        );
        registry.register(
            "cleaner_cel_errors",
            "Cleaner conditions that failed to evaluate (the Cleaner is Ready=False and retried)",
            metrics.cel_errors.clone(),
        );
        registry.register(
            "cleaner_sink_failures",
            "CloudEvents not delivered after every retry",
            metrics.sink_failures.clone(),
        );
        registry.register(
            "cleaner_sink_refused",
            "CloudEvents not sent because the sink policy refused their destination",
            metrics.sink_refused.clone(),
        );
        registry.register(
            "cleaner_target_lists",
            "Complete (re)lists of a kind that Cleaners refer to: one at start, one more after each 410 Gone",
            metrics.lists.clone(),
        );
        metrics
    }

    pub fn deleted(&self, what: &'static str) {
        self.deletions.get_or_create(&WhatLabels { what }).inc();
    }
}
