//! The chart's `webhook.clientAuth` and `webhook.networkPolicy`, which decide who may reach the
//! webhook. Client certificates are off by default; the NetworkPolicy is `auto`, on where the
//! chart learns the API server's addresses, which `helm template` never does (so the defaults
//! still render deploy/, `chart.rs`). On, the webhook gets `--client-ca-file` from the named
//! ConfigMap and a NetworkPolicy admits its HTTPS port from the API server's CIDRs alone and its
//! metrics port from the named peers alone; the render lints and the API server accepts it;
//! either turned on (`true`) without what it needs fails the render, saying what to give.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use super::{CHART, apply_dry_run, args_of, container_of, objects, pod_of, refuses, render};
use crate::cleaners::helm;
use crate::support::{Env, TestNamespace};

pub(super) fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "the_helm_chart_verifies_the_api_servers_client_certificate_and_fences_the_webhook_when_asked",
            rendered,
        ),
        env.trial(
            "the_helm_chart_refuses_client_auth_or_a_network_policy_without_what_they_need",
            refused,
        ),
        env.trial(
            "the_helm_chart_fences_the_webhook_by_default_to_the_api_servers_addresses_it_looks_up",
            learned,
        ),
    ]
}

const ON: [&str; 8] = [
    "--set",
    "webhook.clientAuth.enabled=true,webhook.clientAuth.caConfigMap=api-server-clients",
    "--set",
    "webhook.networkPolicy.enabled=true",
    "--set",
    "webhook.networkPolicy.apiServerCIDRs={10.0.0.0/28,192.168.7.5/32}",
    "--set-json",
    r#"webhook.networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]"#,
];

async fn rendered(ns: TestNamespace) -> Result<()> {
    let chart = ns.env.cluster.layout.repo_root.join(CHART);
    let said = kube_retention_e2e::run(
        helm(&ns.env)
            .args(["lint", "--strict"])
            .args(ON)
            .arg(&chart),
    )?;
    ensure!(said.contains("0 chart(s) failed"), "helm lint: {said}");
    let yaml = render(&ns, &ON)?;
    let rendered = objects(&yaml)?;

    let policy = rendered
        .get("NetworkPolicy kube-retention/kube-retention-webhook")
        .context("the NetworkPolicy")?;
    let expected = json!({
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kube-retention-webhook"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/28"}}, {"ipBlock": {"cidr": "192.168.7.5/32"}}],
             "ports": [{"protocol": "TCP", "port": "https"}]},
            {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
             "ports": [{"protocol": "TCP", "port": "metrics"}]},
        ],
    });
    ensure!(policy["spec"] == expected, "the NetworkPolicy: {policy}");

    let pod = pod_of(&rendered, "kube-retention", "kube-retention-webhook")?;
    let webhook = container_of(pod, "webhook")?;
    let args = args_of(webhook)?;
    for flag in [
        "--client-ca-file=/client-ca/ca.crt",
        "--metrics-address=0.0.0.0:8080",
    ] {
        ensure!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    ensure!(
        webhook["volumeMounts"]
            .as_array()
            .context("mounts")?
            .contains(&json!({"name": "client-ca", "mountPath": "/client-ca", "readOnly": true})),
        "the CA is mounted: {webhook}"
    );
    ensure!(
        pod["volumes"]
            .as_array()
            .context("volumes")?
            .contains(&json!({"name": "client-ca", "configMap": {"name": "api-server-clients"}})),
        "the CA comes from the ConfigMap: {pod}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        ensure!(
            webhook[probe]["httpGet"]["port"] == "metrics"
                && webhook[probe]["httpGet"].get("scheme").is_none(),
            "{probe} on the plain port, which needs no client certificate: {webhook}"
        );
    }
    let applied = apply_dry_run(&ns, &yaml)?;
    ensure!(
        applied.contains(
            "networkpolicy.networking.k8s.io/kube-retention-webhook created (server dry run)"
        ) && applied.contains("deployment.apps/kube-retention-webhook created (server dry run)"),
        "kubectl apply --dry-run=server: {applied}"
    );
    Ok(())
}

async fn refused(ns: TestNamespace) -> Result<()> {
    for (values, expected) in [
        (
            "webhook.networkPolicy.enabled=true",
            "webhook.networkPolicy.apiServerCIDRs: name the addresses the API server calls the \
             webhook from",
        ),
        (
            "webhook.clientAuth.enabled=true",
            "webhook.clientAuth.caConfigMap: name the ConfigMap holding the CA of the API \
             server's client certificate",
        ),
    ] {
        refuses(&ns, values, expected)?;
    }
    let defaults = objects(&render(&ns, &[])?)?;
    ensure!(
        !defaults.keys().any(|key| key.starts_with("NetworkPolicy ")),
        "no NetworkPolicy where the chart cannot learn the API server's addresses"
    );
    Ok(())
}

/// Rendered against the cluster (`--dry-run=server`, as `helm install` renders), the default
/// NetworkPolicy admits the HTTPS port from the addresses of the `kubernetes` EndpointSlice
/// alone; `enabled=false` renders none. The suite's control plane without a node runs no
/// endpoint reconciler (`--endpoint-reconciler-type=none`), so there the slice is absent: the
/// chart then renders no NetworkPolicy (it cannot learn the addresses), and the test writes the
/// slice as the API server's reconciler would (at an address of its own), for the rest, and
/// removes it after.
async fn learned(ns: TestNamespace) -> Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(ns.env.client.clone(), "default");
    let written = if slices.get_opt(API_SERVER_SLICE).await?.is_none() {
        let unlearned = objects(&render(&ns, &["--dry-run=server"])?)?;
        ensure!(
            !unlearned
                .keys()
                .any(|key| key.starts_with("NetworkPolicy ")),
            "no NetworkPolicy where the API server's addresses cannot be looked up"
        );
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": API_SERVER_SLICE,
                         "labels": {"kubernetes.io/service-name": "kubernetes",
                                    "endpointslice.kubernetes.io/managed-by": "kube-retention-e2e"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [API_SERVER_ADDRESS], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}))?;
        slices.create(&PostParams::default(), &slice).await?;
        true
    } else {
        false
    };
    let outcome = fenced_to_the_slice(&ns).await;
    if written {
        slices
            .delete(API_SERVER_SLICE, &DeleteParams::default())
            .await?;
    }
    outcome
}

/// The `kubernetes` Service's EndpointSlice, which the chart looks up.
const API_SERVER_SLICE: &str = "kubernetes";
/// The address the test's slice gives the API server: a documentation address (RFC 5737), as
/// an EndpointSlice may not name loopback, and one no other test reaches.
const API_SERVER_ADDRESS: &str = "192.0.2.10";

async fn fenced_to_the_slice(ns: &TestNamespace) -> Result<()> {
    let slice: Value = serde_json::from_str(&kube_retention_e2e::run(ns.env.kubectl().args([
        "get",
        "endpointslice",
        API_SERVER_SLICE,
        "-n",
        "default",
        "-o",
        "json",
    ]))?)?;
    let from: Vec<Value> = slice["endpoints"]
        .as_array()
        .context("the API server's endpoints")?
        .iter()
        .flat_map(|endpoint| {
            endpoint["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|address| {
            let address = address.as_str().unwrap_or_default();
            let bits = if address.contains(':') { 128 } else { 32 };
            json!({"ipBlock": {"cidr": format!("{address}/{bits}")}})
        })
        .collect();
    ensure!(
        !from.is_empty(),
        "the kubernetes EndpointSlice has addresses: {slice}"
    );
    let rendered = objects(&render(ns, &["--dry-run=server"])?)?;
    let policy = rendered
        .get("NetworkPolicy kube-retention/kube-retention-webhook")
        .context("a NetworkPolicy by default where the chart can look the API server up")?;
    let expected = json!([{"from": from, "ports": [{"protocol": "TCP", "port": "https"}]}]);
    ensure!(
        policy["spec"]["ingress"] == expected,
        "the NetworkPolicy: {policy}, expected ingress {expected}"
    );
    let off = objects(&render(
        ns,
        &[
            "--dry-run=server",
            "--set",
            "webhook.networkPolicy.enabled=false",
        ],
    )?)?;
    ensure!(
        !off.keys().any(|key| key.starts_with("NetworkPolicy ")),
        "no NetworkPolicy when it is turned off"
    );
    Ok(())
}
