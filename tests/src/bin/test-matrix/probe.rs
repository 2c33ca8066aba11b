//! What a minor's API server enables that kube-retention's behaviour depends on, read from that
//! server — its `kubernetes_feature_enabled` metric and discovery — and what kube-retention's
//! controller did about it, from its own metrics: a local cluster (`make up`'s) of that minor is
//! started for the reading and stopped after.

use std::path::Path;

use anyhow::{Context, Result};
use kube_retention_e2e::{Layout, LocalCluster, components, feature_gates, run};

/// The API server's feature gates the report names: streamed lists (`sendInitialEvents`) and
/// MutatingAdmissionPolicies.
pub const GATES: [&str; 2] = ["WatchList", "MutatingAdmissionPolicy"];

/// The resources whose serving the report names, as (group version path, plural).
pub const RESOURCES: [(&str, &str); 3] = [
    ("/apis/networking.k8s.io/v1", "servicecidrs"),
    (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
    ),
    (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingadmissionpolicies",
    ),
];

/// One minor's readings, in the report's order: each gate ("on", "off", or "—" where the server
/// has no such gate), each resource ("served" or "not served"), and the controller's paged
/// fallbacks for refused streamed lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub gates: Vec<String>,
    pub resources: Vec<String>,
    /// `kube_retention_list_fallbacks_total{reason="refused"}` summed over APIs, after start.
    pub refused_streamed_lists: u64,
}

/// Starts a local cluster of `minor` in `state`, reads it, and stops it.
pub fn features(minor: &str, state: &Path) -> Result<Features> {
    let layout = Layout::for_minor(state, minor)?;
    LocalCluster::down(&layout).ok();
    let (cluster, _) = LocalCluster::up(layout.clone())?;
    let read = read(&cluster);
    LocalCluster::down(&layout).context("stopping the probe's cluster")?;
    read
}

fn read(cluster: &LocalCluster) -> Result<Features> {
    let metrics = feature_gates::api_server_metrics(cluster)?;
    let gates = GATES
        .iter()
        .map(|gate| match feature_gates::enabled(&metrics, gate) {
            Some(true) => "on".to_owned(),
            Some(false) => "off".to_owned(),
            None => "—".to_owned(),
        })
        .collect();
    let mut resources = Vec::new();
    for (path, plural) in RESOURCES {
        let discovery = run(cluster.kubectl().args(["get", "--raw", path]))?;
        let served = discovery.contains(&format!("\"name\":\"{plural}\""));
        resources.push(if served { "served" } else { "not served" }.to_owned());
    }
    let controller = components::http_get(cluster.controller_port, "/metrics")?;
    let refused_streamed_lists = controller
        .lines()
        .filter(|line| {
            line.starts_with("kube_retention_list_fallbacks_total{")
                && line.contains("reason=\"refused\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    Ok(Features {
        gates,
        resources,
        refused_streamed_lists,
    })
}
