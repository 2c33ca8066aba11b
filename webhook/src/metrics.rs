//! The webhook's Prometheus metrics: requests by hook, kind, operation and outcome, and a
//! latency histogram.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::review::Hook;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum AdmissionOutcome {
    Allowed,
    Patched,
    Denied,
    /// The writer may not delete what its retention settings govern.
    Forbidden,
    /// Whether the writer may could not be checked: refused.
    Unchecked,
    Malformed,
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
        Self {
            registry: Arc::new(registry),
            requests,
            duration,
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
