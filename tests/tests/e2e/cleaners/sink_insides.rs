//! The cluster's insides refused as sinks on the real cluster, learned from its API while the
//! controller runs. The controller is restarted with an admin's allow list that opens
//! 10.0.0.0/8; then Cleaners whose sinks are an address in the service CIDR (the default
//! ServiceCIDR the API server makes of `--service-cluster-ip-range`), a Node's InternalIP and an
//! API server endpoint (an EndpointSlice of the `kubernetes` Service in `default`) — the Node
//! and the slice made by the test after the controller started — are refused when the
//! controller connects: each address is on the loopback interface with a listener that counts
//! connections, and none reaches it, while a sink elsewhere in 10.0.0.0/8 is connected to; each
//! refused Cleaner's Event names why, and the controller's log what it learned from which
//! object. This restarts the shared controller, so it runs with the
//! disruptive trials.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube_retention_e2e::components::{self, CONTROLLER};
use serde_json::json;

use super::sink::apply_announcing_cleaner;
use super::sink_policy::refused_total;
use super::{events, expect};
use crate::listeners::Listener;
use crate::support::{TestNamespace, restart_controller};
use crate::workloads::eventually;

/// In the cluster's service CIDR (`kube_retention_e2e::node::SERVICE_CIDR`, 10.96.0.0/16).
const SERVICE_ADDRESS: &str = "10.96.250.77";
const SERVICE_CIDR: &str = kube_retention_e2e::node::SERVICE_CIDR;
/// The probe Node's InternalIP.
const NODE_ADDRESS: &str = "10.215.77.2";
/// The probe EndpointSlice's address: an API server, as the `kubernetes` Service says.
const API_SERVER_ADDRESS: &str = "10.215.77.3";
/// In the allowed 10.0.0.0/8 and none of the cluster's insides.
const OUTSIDE_ADDRESS: &str = "10.215.78.9";

pub async fn refused_inside(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let opened = "--cloud-event-sink-allow=127.0.0.2/32,10.0.0.0/8".to_owned();
    restart_controller(&cluster, &[opened])?;
    let name = format!("sink-probe-{}", ns.name);
    let outcome = match make_insides(&ns, &name).await {
        Ok(()) => refused(&ns, &name).await,
        Err(error) => Err(error),
    };
    remove_insides(&ns, &name).await;
    // Whatever happened, the suite goes on with the usual controller.
    restart_controller(&cluster, &[])?;
    outcome
}

/// A Node with an InternalIP, and an API server EndpointSlice: both `name`.
async fn make_insides(ns: &TestNamespace, name: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(ns.env.client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("creating Node {name}"))?;
    let status = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": NODE_ADDRESS},
        {"type": "Hostname", "address": name}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("writing Node {name}'s addresses"))?;
    let slices: Api<EndpointSlice> = Api::namespaced(ns.env.client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [API_SERVER_ADDRESS], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}))?;
    slices
        .create(&PostParams::default(), &slice)
        .await
        .with_context(|| format!("creating EndpointSlice default/{name}"))?;
    Ok(())
}

async fn remove_insides(ns: &TestNamespace, name: &str) {
    let nodes: Api<Node> = Api::all(ns.env.client.clone());
    if let Err(error) = nodes.delete(name, &DeleteParams::default()).await {
        eprintln!("deleting the probe Node {name}: {error}");
    }
    let slices: Api<EndpointSlice> = Api::namespaced(ns.env.client.clone(), "default");
    if let Err(error) = slices.delete(name, &DeleteParams::default()).await {
        eprintln!("deleting the probe EndpointSlice default/{name}: {error}");
    }
}

/// The controller's count of learned ranges of `inside` (`node_address`, …).
fn learned(ns: &TestNamespace, inside: &str) -> Result<u64> {
    let series = format!("kube_retention_sink_policy_learned_ranges{{inside=\"{inside}\"}}");
    components::counter(ns.env.cluster.controller_port, &series)
}

async fn refused(ns: &TestNamespace, name: &str) -> Result<()> {
    eventually(
        Duration::from_secs(30),
        "the controller to learn the service CIDR, the Node and the API server's slice",
        || async {
            Ok(learned(ns, "service_cidr")? >= 1
                && learned(ns, "node_address")? >= 1
                && learned(ns, "api_server_endpoint")? >= 1)
        },
    )
    .await?;
    // The admin sees what is denied, and which object said so, in the controller's log.
    let log = components::log_lines(&ns.env.cluster, CONTROLLER)?;
    let node = format!("object={name} denied={NODE_ADDRESS}/32 (a node's address)");
    let learned_lines: Vec<String> = log
        .into_iter()
        .filter(|line| line.contains("ranges learned from the cluster changed"))
        .collect();
    expect(
        learned_lines.iter().any(|line| line.contains(&node)),
        || {
            format!(
                "the controller's log names the probe Node's address ({node}): {learned_lines:#?}"
            )
        },
    )?;
    let refused_before = refused_total(ns)?;
    let cases = [
        (
            "service",
            SERVICE_ADDRESS,
            format!("in {SERVICE_CIDR}, the cluster's service CIDR"),
        ),
        (
            "node",
            NODE_ADDRESS,
            format!("in {NODE_ADDRESS}/32, a node's address"),
        ),
        (
            "api-server",
            API_SERVER_ADDRESS,
            format!("in {API_SERVER_ADDRESS}/32, an API server endpoint"),
        ),
    ];
    let mut listeners = Vec::new();
    for (cleaner, address, _) in &cases {
        let listener = Listener::start(address).await?;
        let sink = format!("http://{}/", listener.address);
        apply_announcing_cleaner(ns, cleaner, &sink).await?;
        listeners.push((listener, sink));
    }
    for ((cleaner, address, why), (_, sink)) in cases.iter().zip(&listeners) {
        let expected =
            format!("CloudEvent to {sink} refused by the sink policy: {address} is {why}");
        eventually(
            Duration::from_secs(30),
            &format!("the Cleaner {cleaner}'s SinkRefused Event"),
            || async {
                Ok(events(ns, cleaner)?
                    .iter()
                    .any(|(reason, _)| reason == "SinkRefused"))
            },
        )
        .await?;
        let said = events(ns, cleaner)?;
        expect(
            said.iter()
                .any(|(reason, note)| reason == "SinkRefused" && *note == expected),
            || format!("the Cleaner {cleaner}'s Events: {said:?}; expected {expected:?}"),
        )?;
        expect(
            !said.iter().any(|(reason, _)| reason == "SinkFailed"),
            || format!("the Cleaner {cleaner}'s sink was tried: {said:?}"),
        )?;
    }
    // The control: an allowed sink is connected to (the listener drops the connection, so its
    // delivery fails and is retried until the controller restarts).
    let outside = Listener::start(OUTSIDE_ADDRESS).await?;
    apply_announcing_cleaner(ns, "outside", &format!("http://{}/", outside.address)).await?;
    eventually(
        Duration::from_secs(30),
        "the controller connecting to the allowed sink",
        || async { Ok(outside.accepted() >= 1) },
    )
    .await?;
    // The refusals came before any connection; the control shows connections are made.
    for ((_, address, _), (listener, _)) in cases.iter().zip(&listeners) {
        let reached = listener.accepted();
        expect(reached == 0, || {
            format!("the controller connected to {address} {reached} times")
        })?;
    }
    let refused = refused_total(ns)?;
    expect(refused >= refused_before + 3, || {
        format!("kube_retention_cleaner_sink_refused_total went from {refused_before} to {refused}")
    })
}
