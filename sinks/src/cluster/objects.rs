//! The three kinds the controller learns the cluster's insides from, decoded lean: the fields
//! that say a range, and of the metadata only what a watch needs (name, namespace,
//! resourceVersion). A Node's status — its images, conditions and `managedFields`, most of its
//! bytes — is read past on each of its updates, never kept.
//!
//! - ServiceCIDRs (`networking.k8s.io/v1`, GA in Kubernetes 1.33): `spec.cidrs`, the ranges of
//!   every Service's ClusterIP.
//! - Nodes: `spec.podCIDRs` (and the older `spec.podCIDR`), `status.addresses` of type
//!   InternalIP and ExternalIP.
//! - The `kubernetes` Service's EndpointSlices in `default`: every endpoint's addresses, ready
//!   or not (an API server that is not ready is still an API server).

use std::borrow::Cow;
use std::fmt::Debug;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::Resource;
use kube::api::ObjectMeta;
use kube_retention_common::sink_policy::{Inside, Range};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::Source;

/// Where the API server's EndpointSlices are: the `kubernetes` Service's, in `default`.
pub const API_SERVER_NAMESPACE: &str = "default";
/// The label that selects them.
pub const API_SERVER_SELECTOR: &str = "kubernetes.io/service-name=kubernetes";

/// An object that says ranges of the cluster's insides.
pub trait Says:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static
{
    /// The source it is watched as.
    const SOURCE: Source;

    /// The ranges it says, each with what it is.
    fn ranges(&self) -> Vec<Range>;

    /// Its name, as the index keys it.
    fn name(&self) -> String {
        self.meta().name.clone().unwrap_or_default()
    }
}

/// `Resource` as the full k8s-openapi type has it, for a lean one.
macro_rules! lean_resource {
    ($lean:ty, $full:ty) => {
        impl Resource for $lean {
            type DynamicType = ();
            type Scope = <$full as Resource>::Scope;

            fn kind(dynamic: &()) -> Cow<'_, str> {
                <$full as Resource>::kind(dynamic)
            }

            fn group(dynamic: &()) -> Cow<'_, str> {
                <$full as Resource>::group(dynamic)
            }

            fn version(dynamic: &()) -> Cow<'_, str> {
                <$full as Resource>::version(dynamic)
            }

            fn plural(dynamic: &()) -> Cow<'_, str> {
                <$full as Resource>::plural(dynamic)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// The metadata a watch needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(meta: Meta) -> Self {
        ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            ..ObjectMeta::default()
        }
    }
}

fn nets<'a>(cidrs: impl IntoIterator<Item = &'a String>, inside: Inside) -> Vec<Range> {
    cidrs
        .into_iter()
        .filter_map(|cidr| cidr.parse::<IpNet>().ok())
        .map(|net| Range::new(net, inside))
        .collect()
}

fn addresses<'a>(addresses: impl IntoIterator<Item = &'a String>, inside: Inside) -> Vec<Range> {
    addresses
        .into_iter()
        .filter_map(|address| address.parse::<IpAddr>().ok())
        .map(|address| Range::new(IpNet::from(address), inside))
        .collect()
}

/// A ServiceCIDR's ranges.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "RawServiceCidr")]
pub struct ServiceCidrRanges {
    metadata: ObjectMeta,
    cidrs: Vec<String>,
}

#[derive(Deserialize)]
struct RawServiceCidr {
    metadata: Meta,
    #[serde(default)]
    spec: CidrsSpec,
}

#[derive(Default, Deserialize)]
struct CidrsSpec {
    #[serde(default)]
    cidrs: Vec<String>,
}

impl From<RawServiceCidr> for ServiceCidrRanges {
    fn from(raw: RawServiceCidr) -> Self {
        Self {
            metadata: raw.metadata.into(),
            cidrs: raw.spec.cidrs,
        }
    }
}

lean_resource!(ServiceCidrRanges, ServiceCIDR);

impl Says for ServiceCidrRanges {
    const SOURCE: Source = Source::ServiceCidrs;

    fn ranges(&self) -> Vec<Range> {
        nets(&self.cidrs, Inside::ServiceCidr)
    }
}

/// A Node's pod CIDRs and addresses.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "RawNode")]
pub struct NodeRanges {
    metadata: ObjectMeta,
    pod_cidrs: Vec<String>,
    addresses: Vec<String>,
}

#[derive(Deserialize)]
struct RawNode {
    metadata: Meta,
    #[serde(default)]
    spec: NodeSpec,
    #[serde(default)]
    status: NodeStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSpec {
    #[serde(rename = "podCIDR")]
    pod_cidr: Option<String>,
    #[serde(rename = "podCIDRs", default)]
    pod_cidrs: Vec<String>,
}

#[derive(Default, Deserialize)]
struct NodeStatus {
    #[serde(default)]
    addresses: Vec<NodeAddress>,
}

#[derive(Deserialize)]
struct NodeAddress {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

impl From<RawNode> for NodeRanges {
    fn from(raw: RawNode) -> Self {
        let mut pod_cidrs = raw.spec.pod_cidrs;
        pod_cidrs.extend(raw.spec.pod_cidr);
        let addresses = raw
            .status
            .addresses
            .into_iter()
            .filter(|address| matches!(address.kind.as_str(), "InternalIP" | "ExternalIP"))
            .map(|address| address.address)
            .collect();
        Self {
            metadata: raw.metadata.into(),
            pod_cidrs,
            addresses,
        }
    }
}

lean_resource!(NodeRanges, Node);

impl Says for NodeRanges {
    const SOURCE: Source = Source::Nodes;

    fn ranges(&self) -> Vec<Range> {
        let mut ranges = nets(&self.pod_cidrs, Inside::PodCidr);
        ranges.extend(addresses(&self.addresses, Inside::NodeAddress));
        ranges
    }
}

/// An EndpointSlice's addresses: those of the API server, where it is the `kubernetes`
/// Service's.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "RawSlice")]
pub struct ApiServerEndpoints {
    metadata: ObjectMeta,
    addresses: Vec<String>,
}

#[derive(Deserialize)]
struct RawSlice {
    metadata: Meta,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}

#[derive(Deserialize)]
struct Endpoint {
    #[serde(default)]
    addresses: Vec<String>,
}

impl From<RawSlice> for ApiServerEndpoints {
    fn from(raw: RawSlice) -> Self {
        Self {
            metadata: raw.metadata.into(),
            addresses: raw
                .endpoints
                .into_iter()
                .flat_map(|endpoint| endpoint.addresses)
                .collect(),
        }
    }
}

lean_resource!(ApiServerEndpoints, EndpointSlice);

impl Says for ApiServerEndpoints {
    const SOURCE: Source = Source::ApiServerEndpoints;

    fn ranges(&self) -> Vec<Range> {
        addresses(&self.addresses, Inside::ApiServerEndpoint)
    }
}
