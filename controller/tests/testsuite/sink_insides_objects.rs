//! How the sink policy's three kinds are decoded (`sinks::cluster::objects`): each says exactly
//! its ranges — a ServiceCIDR its CIDRs, a Node its pod CIDRs and InternalIP and ExternalIP
//! addresses (not its host name or DNS names), an API server EndpointSlice every endpoint's
//! addresses, ready or not — whatever else the object carries; and each is requested where the
//! full kind is.

use kube::Resource;
use kube_retention_sinks::cluster::objects::{
    API_SERVER_NAMESPACE, ApiServerEndpoints, NodeRanges, Says, ServiceCidrRanges,
};
use serde_json::json;

fn ranges<K: Says>(object: serde_json::Value) -> Vec<String> {
    let decoded: K = serde_json::from_value(object).expect("decoded");
    decoded
        .ranges()
        .iter()
        .map(|range| format!("{} {}", range.net, range.inside.label()))
        .collect()
}

#[test]
fn each_kind_says_its_ranges_and_nothing_else() {
    let cidr = json!({"metadata": {"name": "kubernetes", "resourceVersion": "5"},
                      "spec": {"cidrs": ["10.96.0.0/12", "fd00:10:96::/112", "bogus"]}});
    assert_eq!(
        ranges::<ServiceCidrRanges>(cidr),
        ["10.96.0.0/12 service_cidr", "fd00:10:96::/112 service_cidr"]
    );
    let node = json!({"metadata": {"name": "worker", "managedFields": [{"manager": "x"}]},
                      "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["fd00:244::/64"]},
                      "status": {"images": [{"names": ["a"]}], "addresses": [
                          {"type": "InternalIP", "address": "192.0.2.10"},
                          {"type": "ExternalIP", "address": "203.0.113.10"},
                          {"type": "Hostname", "address": "worker"},
                          {"type": "InternalDNS", "address": "worker.internal"}]}});
    assert_eq!(
        ranges::<NodeRanges>(node),
        [
            "fd00:244::/64 pod_cidr",
            "10.244.1.0/24 pod_cidr",
            "192.0.2.10/32 node_address",
            "203.0.113.10/32 node_address"
        ]
    );
    let slice = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
                       "addressType": "IPv4",
                       "endpoints": [{"addresses": ["192.0.2.1"]},
                                     {"addresses": ["192.0.2.2"], "conditions": {"ready": false}}]});
    assert_eq!(
        ranges::<ApiServerEndpoints>(slice),
        [
            "192.0.2.1/32 api_server_endpoint",
            "192.0.2.2/32 api_server_endpoint"
        ]
    );
    let bare: NodeRanges =
        serde_json::from_value(json!({"metadata": {"name": "new"}})).expect("decoded");
    assert!(bare.ranges().is_empty());
    assert_eq!(bare.name(), "new");
}

#[test]
fn a_lean_kind_is_requested_where_its_full_kind_is() {
    assert_eq!(
        ServiceCidrRanges::url_path(&(), None),
        "/apis/networking.k8s.io/v1/servicecidrs"
    );
    assert_eq!(NodeRanges::url_path(&(), None), "/api/v1/nodes");
    assert_eq!(
        ApiServerEndpoints::url_path(&(), Some(API_SERVER_NAMESPACE)),
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    );
}
