//! The attacker's deletions turned against everyone else's (issue 57's fifth and sixth
//! reproductions): a policy announcing its Jobs' deletions to a closed port, so every delivery
//! fails; and a burst of its own — ConfigMaps by the thousand cleaned by its own Cleaner, which
//! it approves itself past the blast-radius guard — which must trip its namespace's circuit
//! breaker only. Beside them, a quiet namespace's policy announces to a sink that answers, and
//! the admin's `--ledger-sink` hears every deletion: neither may lose an announcement for the
//! attacker's failures.

use std::time::Duration;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube_retention_common::annotations::APPROVED_GENERATION;
use kube_retention_common::breaker::{NamespaceTrip, namespaces_configmap_name};
use kube_retention_common::cleaner::Cleaner;
use kube_retention_common::ledger::Entry;
use serde_json::json;

use crate::cleaners::create_cleaner;
use crate::cleaners::sink::Sink;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

const PARALLEL: usize = 16;
/// The controller's namespace and Lease, where the breakers' ConfigMaps live.
const CONTROLLER_NAMESPACE: &str = "kube-retention";
const LEASE: &str = "kube-retention-controller";
/// The label on the burst's ConfigMaps.
const BURST: &str = "kube-retention.test/burst";
/// The Cleaner of the burst.
const CLEANER: &str = "burst";

/// A RetentionPolicy in `ns` deleting its Jobs labelled `label` a second after they finish,
/// announcing each deletion to `sink`.
pub async fn announcing_policy(
    ns: &TestNamespace,
    name: &str,
    label: &str,
    sink: &str,
) -> Result<()> {
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": name, "namespace": ns.name},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "selector": {"matchLabels": {label: "true"}},
                 "ttlAfterSucceeded": "1s", "sink": sink}});
    kube_retention_e2e::run_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &policy.to_string(),
    )?;
    Ok(())
}

/// `count` Jobs `{prefix}-N` in `ns` labelled `label`, finished now; their names.
pub async fn finished_jobs(
    ns: &TestNamespace,
    prefix: &str,
    label: &str,
    count: usize,
) -> Result<Vec<String>> {
    let client = &ns.env.client;
    let names: Vec<String> = (0..count)
        .map(|index| format!("{prefix}-{index}"))
        .collect();
    let labelled = |name: &String| {
        let name = name.clone();
        async move {
            create_job_in(client, &ns.name, &name, json!({})).await?;
            let jobs: Api<k8s_openapi::api::batch::v1::Job> =
                Api::namespaced(client.clone(), &ns.name);
            let patch = json!({"metadata": {"labels": {label: "true"}}});
            jobs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            anyhow::Ok(())
        }
    };
    stream::iter(&names)
        .map(labelled)
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    let finished = now_second();
    stream::iter(&names)
        .map(|name| finish_job(client, &ns.name, name, true, finished))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(names)
}

/// `count` ConfigMaps labelled for the burst, and the attacker's Cleaner over them, which the
/// blast-radius guard holds until the attacker approves it itself; answers once approved.
pub async fn burst(attacker: &TestNamespace, count: usize) -> Result<()> {
    let client = &attacker.env.client;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &attacker.name);
    stream::iter(0..count)
        .map(|index| {
            let config_maps = config_maps.clone();
            async move {
                let config_map: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("burst-{index}"), "labels": {BURST: "true"}}}))?;
                config_maps
                    .create(&PostParams::default(), &config_map)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    let spec = json!({
        "targets": [{"name": "maps", "delete": true,
                     "reference": {"version": "v1", "kind": "ConfigMap",
                                   "matchLabels": {BURST: "true"}}}],
    });
    create_cleaner(attacker, CLEANER, spec).await?;
    let cleaners: Api<Cleaner> = Api::namespaced(client.clone(), &attacker.name);
    eventually(
        Duration::from_secs(120),
        "the burst's Cleaner held for approval",
        || async {
            let cleaner = cleaners.get(CLEANER).await?;
            Ok(crate::cleaners::condition(&cleaner, "Ready")
                .is_some_and(|(_, reason, _)| reason == "AwaitingApproval"))
        },
    )
    .await?;
    // The attacker approves its own Cleaner: the blast-radius guard is a pause to read the
    // count, not a fence against the namespace's own editors.
    let generation = cleaners
        .get(CLEANER)
        .await?
        .metadata
        .generation
        .context("the Cleaner's generation")?;
    let approval =
        json!({"metadata": {"annotations": {APPROVED_GENERATION: generation.to_string()}}});
    cleaners
        .patch(CLEANER, &PatchParams::default(), &Patch::Merge(&approval))
        .await?;
    Ok(())
}

/// The burst's ConfigMaps left.
pub async fn burst_left(attacker: &TestNamespace) -> Result<usize> {
    let config_maps: Api<ConfigMap> = Api::namespaced(attacker.env.client.clone(), &attacker.name);
    let listed = config_maps
        .list(&ListParams::default().labels(&format!("{BURST}=true")))
        .await?;
    Ok(listed.items.len())
}

/// The namespaces whose circuit breakers are open.
pub async fn tripped_namespaces(ns: &TestNamespace) -> Result<Vec<String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), CONTROLLER_NAMESPACE);
    let stored = config_maps
        .get_opt(&namespaces_configmap_name(LEASE))
        .await?;
    let data = stored.and_then(|stored| stored.data).unwrap_or_default();
    Ok(data
        .into_iter()
        .filter(|(_, trip)| serde_json::from_str::<NamespaceTrip>(trip).is_ok())
        .map(|(namespace, _)| namespace)
        .collect())
}

/// The objects, by namespace and name, whose deletions a sink heard of
/// (`dev.retention.deleted`).
pub fn announced(received: &[crate::cleaners::sink::Received]) -> Vec<(String, String)> {
    received
        .iter()
        .filter(|received| {
            received.headers.get("ce-type").map(String::as_str)
                == Some(kube_retention_common::ledger::DELETED)
        })
        .filter_map(|received| {
            let entry: Entry = serde_json::from_value(received.body.clone()).ok()?;
            Some((entry.namespace, entry.name))
        })
        .collect()
}

/// Waits up to two minutes for `sink` to have heard of every deletion of `objects` (namespace,
/// name), saying `what` if it does not.
pub async fn all_announced(sink: &Sink, objects: &[(String, String)], what: &str) -> Result<()> {
    eventually(Duration::from_secs(120), what, || async {
        let heard = announced(&sink.received());
        Ok(objects.iter().all(|object| heard.contains(object)))
    })
    .await
}
