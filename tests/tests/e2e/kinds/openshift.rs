//! OpenShift-style Builds (the CRDs in tests/crds mirror the fields kube-retention reads): a
//! Build's own TTL, and its BuildConfig's history limits — zero keeping none.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::{SignedDuration, Timestamp};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{TestNamespace, object, openshift};
use crate::workloads::{eventually, now_second, sleep_until};

const CONFIG_ANNOTATION: &str = "openshift.io/build-config.name";

async fn create_build(ns: &TestNamespace, name: &str, metadata: Value, spec: Value) -> Result<()> {
    let mut value = json!({"metadata": metadata, "spec": spec});
    value["metadata"]["name"] = json!(name);
    let build = object(&openshift("Build"), value)?;
    ns.dynamic(&openshift("Build"))
        .create(&PostParams::default(), &build)
        .await?;
    Ok(())
}

async fn finish(ns: &TestNamespace, name: &str, phase: &str, at: Timestamp) -> Result<()> {
    let status = json!({"status": {"phase": phase, "completionTimestamp": at.to_string()}});
    ns.dynamic(&openshift("Build"))
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// A Build `short` of a two-second TTL, finished now: when it finished.
pub(crate) async fn short_build_finished(ns: &TestNamespace) -> Result<Timestamp> {
    create_build(
        ns,
        "short",
        json!({}),
        json!({"successfulBuildTTLSeconds": 2}),
    )
    .await?;
    let finished = now_second();
    finish(ns, "short", "Complete", finished).await?;
    Ok(finished)
}

pub async fn by_ttl(ns: TestNamespace) -> Result<()> {
    let finished = short_build_finished(&ns).await?;
    let builds = ns.dynamic(&openshift("Build"));
    let expires = finished + SignedDuration::from_secs(2);
    eventually(Duration::from_secs(5), "the Build is stamped", || async {
        let build = builds.get("short").await?;
        let stamp = build
            .metadata
            .annotations
            .unwrap_or_default()
            .get("retention.dev/expires-at")
            .cloned();
        Ok(stamp == Some(expires.to_string()))
    })
    .await?;
    sleep_until(expires - SignedDuration::from_millis(500)).await;
    ensure!(
        builds.get_opt("short").await?.is_some(),
        "deleted before {expires}"
    );
    eventually(Duration::from_secs(3), "the Build is deleted", || async {
        Ok(builds.get_opt("short").await?.is_none())
    })
    .await
}

pub async fn by_history_limits(ns: TestNamespace) -> Result<()> {
    let config = object(
        &openshift("BuildConfig"),
        json!({"metadata": {"name": "app"},
               "spec": {"successfulBuildsHistoryLimit": 1, "failedBuildsHistoryLimit": 0}}),
    )?;
    ns.dynamic(&openshift("BuildConfig"))
        .create(&PostParams::default(), &config)
        .await?;
    let of_config = json!({"annotations": {CONFIG_ANNOTATION: "app"}});
    for (name, phase) in [
        ("app-1", Some("Complete")),
        ("app-2", Some("Failed")),
        ("app-3", Some("Complete")),
        ("app-4", None),
        ("app-5", Some("Cancelled")),
    ] {
        create_build(&ns, name, of_config.clone(), json!({})).await?;
        if let Some(phase) = phase {
            finish(&ns, name, phase, now_second()).await?;
        }
        // Distinct creation seconds: "newest" is then the last created.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let builds = ns.dynamic(&openshift("Build"));
    eventually(
        Duration::from_secs(10),
        "only the newest complete Build and the running one remain",
        || async {
            let mut names: Vec<String> = builds
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter_map(|build| build.metadata.name)
                .collect();
            names.sort();
            Ok(names == ["app-3", "app-4"])
        },
    )
    .await?;
    // And they stay.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = builds.list(&ListParams::default()).await?.items.len();
    ensure!(left == 2, "{left} Builds left");
    Ok(())
}
