//! The cluster's insides, learned from the API and denied as CloudEvent sinks: the service
//! CIDRs (ServiceCIDRs), the nodes' pod CIDRs and addresses (Nodes), and the API server's own
//! endpoints (the `kubernetes` Service's EndpointSlices in `default`), re-read as they change.
//! No flag can list these ahead of time — a node joins, a ServiceCIDR is added — and a
//! namespace editor's sink pointed at any of them would make the controller, shared by every
//! namespace, reach a kubelet, a node's host-network pods or another tenant's Service.
//!
//! One task, `sink-policy` (supervised), watches the three ([`watch`]: lists streamed as every
//! watch of the controller lists, each kind decoded lean, [`objects`]) and is the one owner of
//! the index of what they say ([`Owner`]): it publishes the admin's policy with the learned
//! ranges denied after every change, and every sender judges each connection by the policy in
//! force then ([`SharedPolicy`]). Until each kind has been listed or has failed, senders wait.
//! A kind the controller may not read, or that the cluster does not serve (ServiceCIDRs before
//! Kubernetes 1.33), is logged, counted (`kube_retention_sink_policy_watch_errors_total`) and
//! tried again; what is known still applies, and the static defaults always do. What is denied
//! is logged at each change and counted (`kube_retention_sink_policy_learned_ranges`).
//!
//! Not learned: pod addresses a CNI allocates outside the nodes' `podCIDRs` (AWS VPC CNI,
//! Calico IP pools), load balancers' addresses, and nodes' DNS names. Deny those with
//! `--cloud-event-sink-deny`.

use futures::{StreamExt, stream};
use kube::runtime::watcher;
use kube::{Api, Client};
use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_runtime::sinks::{Publisher, SharedPolicy, shared};
use kube_retention_runtime::supervise::{self, Supervised};

use crate::metrics::SinkPolicyMetrics;
use kube_retention_io::initial_list::Lists;

pub mod objects;
mod owner;
pub mod watch;

use objects::{API_SERVER_NAMESPACE, API_SERVER_SELECTOR, ApiServerEndpoints};
use objects::{NodeRanges, ServiceCidrRanges};
pub use owner::Owner;
pub use watch::{UNAVAILABLE_RETRY, Unavailable, Update};

/// The supervised task's name.
pub const TASK: &str = "sink-policy";

/// A kind the cluster's insides are learned from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    ServiceCidrs,
    Nodes,
    ApiServerEndpoints,
}

impl Source {
    pub const ALL: [Self; 3] = [Self::ServiceCidrs, Self::Nodes, Self::ApiServerEndpoints];

    /// Its kind, as the index keys its objects and metrics and the log name it.
    pub fn kind(self) -> &'static str {
        match self {
            Self::ServiceCidrs => "ServiceCIDR",
            Self::Nodes => "Node",
            Self::ApiServerEndpoints => "EndpointSlice",
        }
    }

    /// What it says, for the log.
    fn says(self) -> &'static str {
        match self {
            Self::ServiceCidrs => "the service CIDRs",
            Self::Nodes => "the nodes' pod CIDRs and addresses",
            Self::ApiServerEndpoints => "the API server's endpoints",
        }
    }

    /// The resource the controller needs to read, as RBAC names it.
    fn resource(self) -> &'static str {
        match self {
            Self::ServiceCidrs => "servicecidrs.networking.k8s.io",
            Self::Nodes => "nodes",
            Self::ApiServerEndpoints => "endpointslices.discovery.k8s.io in default",
        }
    }
}

/// What learning needs: the client, how watches list, the policy the learned ranges are added
/// to, and the metrics.
pub struct Learning {
    pub client: Client,
    pub lists: Lists,
    /// The admin's policy with what the controller knows of itself.
    pub base: SinkPolicy,
    pub metrics: SinkPolicyMetrics,
}

impl Learning {
    /// Starts learning: the policy every sender judges by (`base` until the first change,
    /// unsettled until every kind has been heard from), and the supervised task that keeps it.
    pub fn spawn(self) -> (SharedPolicy, Supervised) {
        let (publisher, policy) = shared(self.base.clone());
        (policy, supervise::spawn(TASK, self.run(publisher)))
    }

    /// Watches the three kinds and keeps the policy `publisher` publishes, until the process
    /// ends; a watch stream does not end on its own, so an end is a fault.
    pub async fn run(self, publisher: Publisher) -> Result<(), &'static str> {
        let config = watcher::Config::default();
        let endpoints: Api<ApiServerEndpoints> =
            Api::namespaced(self.client.clone(), API_SERVER_NAMESPACE);
        let mut updates = stream::select_all([
            watch::updates::<ServiceCidrRanges>(
                &self.lists,
                Api::all(self.client.clone()),
                config.clone(),
            ),
            watch::updates::<NodeRanges>(&self.lists, Api::all(self.client), config.clone()),
            watch::updates(&self.lists, endpoints, config.labels(API_SERVER_SELECTOR)),
        ]);
        let mut owner = Owner::new(self.base, publisher, self.metrics);
        while let Some(update) = updates.next().await {
            owner.handle(update);
        }
        Err("the watches of the cluster's insides ended")
    }
}
