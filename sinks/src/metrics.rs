//! The sink policy's metrics, registered with the controller's: what it learned of the cluster
//! and denies, and the watches that could not tell it.

use kube_retention_common::sink_policy::Inside;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct InsideLabels {
    pub inside: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WatchErrorLabels {
    pub kind: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct SinkPolicyMetrics {
    pub learned: Family<InsideLabels, Gauge>,
    pub watch_errors: Family<WatchErrorLabels, Counter>,
}

impl SinkPolicyMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "sink_policy_learned_ranges",
            "Ranges of the cluster's insides the sink policy denies as CloudEvent sinks, learned from the API, by what they are (service_cidr, pod_cidr, node_address, api_server_endpoint)",
            metrics.learned.clone(),
        );
        registry.register(
            "sink_policy_watch_errors",
            "Failed watches of what the sink policy learns from (ServiceCIDR, Node, EndpointSlice), by kind and why (forbidden, not_served, failed): what they would say is not denied",
            metrics.watch_errors.clone(),
        );
        metrics
    }

    /// How many ranges of `inside` are learned.
    pub fn learned(&self, inside: Inside) -> i64 {
        self.learned
            .get_or_create(&InsideLabels {
                inside: inside.label(),
            })
            .get()
    }

    /// How many watches of `kind` failed for `reason`.
    pub fn watch_errors(&self, kind: &'static str, reason: &'static str) -> u64 {
        self.watch_errors
            .get_or_create(&WatchErrorLabels { kind, reason })
            .get()
    }
}
