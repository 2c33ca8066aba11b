//! The webhook's Prometheus metrics: requests by hook, kind, operation and outcome, a latency
//! histogram, and how much of its bounded capacity is in use (admissions in flight, CEL
//! compilations running). Outcomes are exported in lower case (`denied`, `timeout`), as the
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
        Self {
            registry: Arc::new(registry),
            requests,
            duration,
            admissions_in_flight,
            compilations_running,
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

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding metrics");
        }
        text
    }
}
