//! The breaker's metrics: whether it is open, how often this replica opened it, and how many
//! deletions wait for its release. [`store`](super::store) keeps them current.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Default)]
pub struct BreakerMetrics {
    pub open: Gauge,
    pub trips: Counter,
    pub held: Gauge,
}

impl BreakerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "circuit_breaker_open",
            "1 while the circuit breaker is open: no deletion is sent until it is released",
            metrics.open.clone(),
        );
        registry.register(
            "circuit_breaker_trips",
            "Times this replica's circuit breaker opened: more deletions within its window than its limit",
            metrics.trips.clone(),
        );
        registry.register(
            "deletions_held_by_circuit_breaker",
            "Deletions (the executor's and Cleaners') waiting for the circuit breaker to be released",
            metrics.held.clone(),
        );
        metrics
    }
}
