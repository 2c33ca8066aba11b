//! The deletion ledger's metrics, registered with the controller's.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Which sink: the governing policy's `spec.sink` (`policy`) or `--ledger-sink` (`cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SinkLabels {
    pub sink: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct LedgerMetrics {
    pub delivered: Family<SinkLabels, Counter>,
    pub dropped: Family<SinkLabels, Counter>,
    pub undelivered: Family<SinkLabels, Counter>,
    pub archive_failures: Counter,
}

impl LedgerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "ledger_events_delivered",
            "Deletion-ledger CloudEvents a sink acknowledged, by sink (policy, cluster)",
            metrics.delivered.clone(),
        );
        registry.register(
            "ledger_events_dropped",
            "Deletion-ledger CloudEvents dropped because the queue was full (--ledger-queue), by sink",
            metrics.dropped.clone(),
        );
        registry.register(
            "ledger_events_undelivered",
            "Deletion-ledger CloudEvents not delivered after every retry, or refused by the sink policy, by sink",
            metrics.undelivered.clone(),
        );
        registry.register(
            "archive_failures",
            "Deletions held back because the policy's sink did not acknowledge the object (archiveBeforeDelete)",
            metrics.archive_failures.clone(),
        );
        metrics
    }
}
