//! Kinds beyond Shipwright's, Jobs and Pods: annotated objects of any kind deleted by the default
//! install, a kind the controller may not delete (warned of at admission, deleted once an
//! aggregated ClusterRole grants it, without a restart), a kind added with `--kind` and its label
//! limits, and OpenShift-style Builds by their TTL and their BuildConfig's history limits.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ApiResource, GroupVersionKind, Patch, PatchParams, PostParams};
use kube_retention_e2e::components;
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::support::{Env, TestNamespace, object};
use crate::workloads::{eventually, now_second, sleep_until};

pub(crate) mod openshift;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "an_annotated_configmap_is_deleted_on_time_by_the_default_install",
            configmap,
        ),
        env.trial(
            "an_ungranted_kind_is_warned_of_then_deleted_once_an_aggregated_role_grants_it",
            ungranted,
        ),
        env.trial(
            "a_kind_added_with_the_kind_flag_keeps_its_label_limits",
            extra_kind,
        ),
        env.trial("an_openshift_build_goes_by_its_ttl", openshift::by_ttl),
        env.trial(
            "openshift_builds_go_by_their_buildconfig_history_limits_including_zero",
            openshift::by_history_limits,
        ),
    ]
}

pub const GROUP: &str = "e2e.retention.dev";

/// A namespaced custom kind of `GROUP` with a status subresource; returns its API resource once
/// the API server serves it.
pub async fn define_kind(env: &Env, kind: &str) -> Result<ApiResource> {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_ascii_lowercase()},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": true}}}]}});
    kube_retention_e2e::run_with_input(env.kubectl().args(["apply", "-f", "-"]), &crd.to_string())?;
    kube_retention_e2e::run(env.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        &format!("crd/{plural}.{GROUP}"),
    ]))?;
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1", kind),
        &plural,
    ))
}

/// Grants the controller what it needs on `plural` of `GROUP`, the way an admin would: a
/// ClusterRole its own aggregates.
pub fn grant(env: &Env, plural: &str) -> Result<()> {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("e2e-retention-{plural}"),
                     "labels": {"retention.dev/aggregate-to-controller": "true"}},
        "rules": [{"apiGroups": [GROUP], "resources": [plural],
                   "verbs": ["list", "watch", "patch", "delete"]}]});
    kube_retention_e2e::run_with_input(
        env.kubectl().args(["apply", "-f", "-"]),
        &role.to_string(),
    )?;
    Ok(())
}

async fn configmap(ns: TestNamespace) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let mut config_map = ConfigMap::default();
    config_map.metadata.name = Some("short-lived".into());
    config_map.metadata.annotations = Some([("retention.dev/ttl".into(), "3s".into())].into());
    let created = config_maps
        .create(&PostParams::default(), &config_map)
        .await?;
    let annotations = created.metadata.annotations.unwrap_or_default();
    let expires_at: Timestamp = annotations
        .get("retention.dev/expires-at")
        .ok_or_else(|| anyhow::anyhow!("not stamped: {annotations:?}"))?
        .parse()?;
    sleep_until(expires_at - jiff::SignedDuration::from_millis(500)).await;
    ensure!(
        config_maps.get_opt("short-lived").await?.is_some(),
        "deleted before {expires_at}"
    );
    eventually(
        Duration::from_secs(3),
        "the ConfigMap is deleted",
        || async { Ok(config_maps.get_opt("short-lived").await?.is_none()) },
    )
    .await?;
    let late = Timestamp::now().duration_since(expires_at);
    ensure!(late.as_secs_f64() < 2.5, "deleted {late} after expiry");
    Ok(())
}

async fn ungranted(ns: TestNamespace) -> Result<()> {
    let gadgets = define_kind(&ns.env, "Gadget").await?;
    let gadget = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gadget",
                        "metadata": {"name": "g", "annotations": {"retention.dev/ttl": "1s"}}});
    let output = kube_retention_e2e::output_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &gadget.to_string(),
    )?;
    let printed = String::from_utf8_lossy(&output.stderr);
    let expected = format!(
        "Warning: kube-retention cannot delete this: grant its controller list, watch, patch, delete on gadgets.{GROUP}"
    );
    ensure!(
        output.status.success() && printed.contains(&expected),
        "{printed}"
    );
    let api = ns.dynamic(&gadgets);
    let metrics = || components::http_get(ns.env.cluster.controller_port, "/metrics");
    let series = format!(
        "kube_retention_unpermitted_kind{{kind=\"Gadget.{GROUP}\",missing=\"list,watch,patch,delete\"}} 1"
    );
    eventually(
        Duration::from_secs(10),
        "the kind is counted as unpermitted",
        || async { Ok(metrics()?.lines().any(|line| line == series)) },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        api.get_opt("g").await?.is_some(),
        "deleted without permission?"
    );

    grant(&ns.env, "gadgets")?;
    eventually(
        Duration::from_secs(20),
        "the Gadget is deleted once the controller may",
        || async { Ok(api.get_opt("g").await?.is_none()) },
    )
    .await?;
    let counted = format!("kube_retention_unpermitted_kind{{kind=\"Gadget.{GROUP}\"");
    let metrics = metrics()?;
    ensure!(!metrics.contains(&counted), "still counted: {metrics}");
    Ok(())
}

/// A second controller with `--kind e2e.retention.dev/v1/Run:e2e.retention.dev/pipeline=1,`
/// (its own Lease, every other kind switched off so it leaves the other tests alone) keeps only
/// the newest succeeded Run per pipeline.
async fn extra_kind(ns: TestNamespace) -> Result<()> {
    let runs = define_kind(&ns.env, "Run").await?;
    grant(&ns.env, "runs")?;
    let cluster = &ns.env.cluster;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let controller = components::start_controller(
        cluster,
        "e2e-extra-kind-controller",
        port,
        &[
            format!("--kind={GROUP}/v1/Run:{GROUP}/pipeline=1,"),
            "--lease-name=e2e-extra-kind-controller".into(),
            // Its breaker's ConfigMap would be named after its Lease, which the deploy/ Role
            // does not name; the breaker is not what this controller is here for.
            "--circuit-breaker=off".into(),
            "--discovery-interval=0s".into(),
            "--disable-kind=Build.shipwright.io".into(),
            "--disable-kind=BuildRun.shipwright.io".into(),
            "--disable-kind=BuildConfig.build.openshift.io".into(),
            "--disable-kind=Build.build.openshift.io".into(),
            "--disable-kind=Job.batch".into(),
            "--disable-kind=Pod".into(),
        ],
    )?;
    let outcome = limits_of_runs(&ns, &runs).await;
    let seen = match outcome {
        Ok(()) => the_plugin_judges_with_the_kinds_of_the_controller_it_asks(&ns).await,
        failed => failed,
    };
    controller.stop(Duration::from_secs(5))?;
    seen
}

/// `kubectl retention explain` judges with the kinds the controller whose Lease it reads
/// publishes there: this controller leaves Jobs alone, the main one deletes them.
async fn the_plugin_judges_with_the_kinds_of_the_controller_it_asks(
    ns: &TestNamespace,
) -> Result<()> {
    let ttl = json!({"retention.dev/ttl-after-finished": "1h"});
    crate::plugin::job(ns, "judged-twice", json!({}), ttl, Some(1)).await?;
    let explain = |lease: &str| -> Result<Value> {
        let said = kube_retention_e2e::run(crate::plugin::kubectl(ns).args([
            "retention",
            "explain",
            "job",
            "judged-twice",
            "-n",
            &ns.name,
            "-o",
            "json",
            &format!("--controller-lease={lease}"),
        ]))?;
        Ok(serde_json::from_str(&said)?)
    };
    let alone = explain("e2e-extra-kind-controller")?;
    ensure!(
        alone["state"] == "left-alone" && alone["deadline"].is_null(),
        "under the controller that leaves Jobs alone: {alone}"
    );
    let main = explain("kube-retention-controller")?;
    ensure!(
        main["state"] == "succeeded" && main["deadline"].is_string(),
        "under the main controller: {main}"
    );
    Ok(())
}

async fn limits_of_runs(ns: &TestNamespace, runs: &ApiResource) -> Result<()> {
    let api = ns.dynamic(runs);
    for (name, pipeline) in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")] {
        let run = object(
            runs,
            json!({"metadata": {"name": name, "labels": {format!("{GROUP}/pipeline"): pipeline}}}),
        )?;
        api.create(&PostParams::default(), &run).await?;
        let at = now_second().to_string();
        let status = json!({"status": {"conditions": [{"type": "Succeeded", "status": "True",
                            "lastTransitionTime": at}]}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        // Distinct creation seconds: "newest" is then the last created.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let running = object(
        runs,
        json!({"metadata": {"name": "a0-running", "labels": {format!("{GROUP}/pipeline"): "a"}}}),
    )?;
    api.create(&PostParams::default(), &running).await?;
    eventually(
        Duration::from_secs(20),
        "all but the newest succeeded Run of pipeline a are deleted",
        || async {
            let mut names = Vec::new();
            for run in api.list(&Default::default()).await? {
                names.push(run.metadata.name.unwrap_or_default());
            }
            names.sort();
            Ok(names == ["a0-running", "a3", "b1"])
        },
    )
    .await
}
