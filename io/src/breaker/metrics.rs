//! The breakers' metrics: whether the cluster's is open, how many namespaces' are, how often
//! this replica opened one, and how many deletions wait for a release. [`store`](super::store)
//! keeps them current.
//!
//! No metric is labelled by namespace: with ten thousand namespaces that would be ten thousand
//! series. Which namespaces are held is what `kubectl retention breaker status` lists (their
//! ConfigMap), and each trip's Warning Event names its namespace; the metrics only say how
//! many, under a `scope` label of two values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Whose breaker: `cluster` or `namespace`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ScopeLabels {
    pub scope: &'static str,
}

impl ScopeLabels {
    pub const CLUSTER: Self = Self { scope: "cluster" };
    pub const NAMESPACE: Self = Self { scope: "namespace" };
}

#[derive(Clone, Debug, Default)]
pub struct BreakerMetrics {
    pub open: Gauge,
    pub open_namespaces: Gauge,
    pub trips: Family<ScopeLabels, Counter>,
    pub held: Gauge,
}

impl BreakerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "circuit_breaker_open",
            "1 while the cluster's circuit breaker is open: no deletion is sent until it is released",
            metrics.open.clone(),
        );
        registry.register(
            "circuit_breaker_open_namespaces",
            "Namespaces whose circuit breaker is open: none of their deletions is sent until each is released",
            metrics.open_namespaces.clone(),
        );
        registry.register(
            "circuit_breaker_trips",
            "Times this replica opened a circuit breaker, by scope (cluster, namespace): more deletions within its window than its limit",
            metrics.trips.clone(),
        );
        registry.register(
            "deletions_held_by_circuit_breaker",
            "Deletions (the executor's and Cleaners') waiting for a circuit breaker, the cluster's or their namespace's, to be released",
            metrics.held.clone(),
        );
        metrics
    }
}
