//! The webhook's Prometheus metrics: requests by hook, kind, operation and outcome, a latency
//! histogram, and how much of its bounded capacity is in use (admissions in flight, the memory
//! they hold and the bodies cut off for room, CEL compilations running, connections open,
//! refused and closed idle). Outcomes are exported in lower case (`denied`, `timeout`), as the
//! alerts ask for them.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use crate::review::AdmissionOutcome;
use crate::review::Hook;

impl EncodeLabelValue for AdmissionOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    hook: &'static str,
    kind: String,
    operation: String,
    outcome: AdmissionOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HookLabels {
    hook: &'static str,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    duration: Family<HookLabels, Histogram>,
    /// Admissions being answered (body read, decoded, checked): at most
    /// `--max-admissions-in-flight`.
    pub admissions_in_flight: Gauge,
    /// CEL compilations running on blocking threads: at most `--max-compilations`.
    pub compilations_running: Gauge,
    /// Bytes admissions hold: at most `--max-admission-memory`.
    admission_memory: Gauge,
    /// Bodies cut off while arriving to make room for others.
    bodies_cut_off: Counter,
    /// Connections open: at most `--max-connections`.
    pub connections_open: Gauge,
    /// Connections refused at accept, by why.
    connections_refused: Family<RefusedLabels, Counter>,
    /// Connections closed by the webhook after a time idle.
    pub connections_idle_closed: Counter,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RefusedLabels {
    reason: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("kube_retention_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "AdmissionReviews answered, by hook, kind, operation and outcome",
            requests.clone(),
        );
        let duration = Family::<HookLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ])
        });
        registry.register(
            "admission_duration_seconds",
            "Time to answer an AdmissionReview, from decoding to the encoded response",
            duration.clone(),
        );
        let admissions_in_flight = Gauge::default();
        registry.register(
            "admissions_in_flight",
            "AdmissionReviews being read or answered",
            admissions_in_flight.clone(),
        );
        let compilations_running = Gauge::default();
        registry.register(
            "cel_compilations_running",
            "Admissions whose CEL expressions are being compiled, each on a blocking thread",
            compilations_running.clone(),
        );
        let admission_memory = Gauge::default();
        registry.register(
            "admission_memory_bytes",
            "Bytes admissions hold: bodies arriving or not yet decoded, and decoded reviews",
            admission_memory.clone(),
        );
        let bodies_cut_off = Counter::default();
        registry.register(
            "admission_bodies_cut_off",
            "Bodies cut off while arriving, to make room for reviews that arrived faster",
            bodies_cut_off.clone(),
        );
        let connections_open = Gauge::default();
        registry.register(
            "connections_open",
            "Connections open on the admission port, TLS handshakes included",
            connections_open.clone(),
        );
        let connections_refused = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections closed as soon as accepted: past the bound on all, or on one peer's",
            connections_refused.clone(),
        );
        let connections_idle_closed = Counter::default();
        registry.register(
            "connections_idle_closed",
            "Connections closed after a time with no request",
            connections_idle_closed.clone(),
        );
        Self {
            registry: Arc::new(registry),
            requests,
            duration,
            admissions_in_flight,
            compilations_running,
            admission_memory,
            bodies_cut_off,
            connections_open,
            connections_refused,
            connections_idle_closed,
        }
    }
}

impl Metrics {
    pub fn observe(
        &self,
        hook: Hook,
        kind: &str,
        operation: &str,
        outcome: AdmissionOutcome,
        started: Instant,
    ) {
        let hook = match hook {
            Hook::Validate => "validate",
            Hook::Mutate => "mutate",
        };
        self.requests
            .get_or_create(&RequestLabels {
                hook,
                kind: kind.to_owned(),
                operation: operation.to_owned(),
                outcome,
            })
            .inc();
        self.duration
            .get_or_create(&HookLabels { hook })
            .observe(started.elapsed().as_secs_f64());
    }

    /// The memory admissions share, of `capacity` bytes, its use and its cuts counted here.
    pub fn memory(&self, capacity: usize) -> crate::memory::Memory {
        crate::memory::Memory::new(
            capacity,
            self.admission_memory.clone(),
            self.bodies_cut_off.clone(),
        )
    }

    /// Counts a connection refused at accept for `reason` (`connections`, `peer`).
    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&RefusedLabels { reason })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding metrics");
        }
        text
    }
}
