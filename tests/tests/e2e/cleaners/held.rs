//! A namespace editor's Cleaner reading every ConfigMap of its namespace, beside twenty
//! ConfigMaps of a megabyte: the controller keeps at most 16 MiB of one namespace's targets
//! (`cleaners/src/book/held.rs`), so it lets that scope go — the Cleaner `Ready=False`,
//! `TargetKindUnavailable`, saying which bound, nothing deleted — instead of holding them all.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube_retention_common::cleaner::Cleaner;
use serde_json::json;

use super::{condition, create_cleaner};
use crate::support::TestNamespace;
use crate::workloads::eventually;

/// ConfigMaps of a megabyte: past the 16 MiB one namespace's targets may hold.
const BIG: usize = 20;

pub async fn outgrown(ns: TestNamespace) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), &ns.name);
    stream::iter(0..BIG)
        .map(|index| {
            let config_maps = config_maps.clone();
            async move {
                let big: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("big-{index}")},
                    "data": {"payload": "x".repeat(1_000_000)}}))?;
                config_maps.create(&PostParams::default(), &big).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(4)
        .try_collect::<Vec<_>>()
        .await?;
    create_cleaner(
        &ns,
        "reads-everything",
        json!({
            "ttl": "1s",
            "retry": {"period": "1h"},
            "targets": [{"name": "maps", "includeWhenEvaluating": true, "delete": true,
                         "reference": {"version": "v1", "kind": "ConfigMap"}}],
            "conditions": ["maps.items.size() > 0"]
        }),
    )
    .await?;
    let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(60),
        "the Cleaner says its targets outgrew the namespace's bound",
        || async {
            let cleaner = cleaners.get("reads-everything").await?;
            Ok(
                condition(&cleaner, "Ready").is_some_and(|(status, reason, _)| {
                    status == "False" && reason == "TargetKindUnavailable"
                }),
            )
        },
    )
    .await?;
    let cleaner = cleaners.get("reads-everything").await?;
    let (_, _, message) = condition(&cleaner, "Ready").context("Ready")?;
    ensure!(
        message.contains(&format!(
            "the objects the Cleaners of namespace {} refer to would hold more than 16 MiB",
            ns.name
        )) && message.contains("delete nothing"),
        "the message says which bound: {message}"
    );
    let left = config_maps
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|config_map| {
            config_map
                .metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with("big-"))
        })
        .count();
    ensure!(left == BIG, "{} of {BIG} ConfigMaps deleted", BIG - left);
    Ok(())
}
