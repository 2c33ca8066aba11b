//! A preview environment cleaned as a group: nothing goes while a revision is Active, although
//! the TTL has passed; retiring it cleans the group within seconds although `retry.period` is
//! an hour — the Helm release uninstalled (its kept object left), the named ConfigMap and the
//! selected revisions deleted, other objects untouched — and the sink gets the CloudEvent.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube_retention_common::cleaner::Cleaner;
use serde_json::json;

use super::sink::Sink;
use super::{
    condition, config_map, config_maps, create_cleaner, exists, expect, grant_helm, helm, revision,
    revisions, services, set_phase,
};
use crate::support::TestNamespace;
use crate::workloads::eventually;

const RELEASE: &str = "preview-42";

pub async fn preview_environment(ns: TestNamespace) -> Result<()> {
    let revisions = revisions(&ns.env).await?;
    grant_helm(&ns)?;
    let chart = ns.env.cluster.layout.repo_root.join("tests/charts/preview");
    kube_retention_e2e::run(
        helm(&ns.env)
            .args(["install", RELEASE, "--namespace", &ns.name, "--wait=false"])
            .arg(&chart),
    )?;
    config_map(&ns, "preview-42-settings").await?;
    revision(&ns, &revisions, "p42-00001", "p42", "Active").await?;
    revision(&ns, &revisions, "p42-00002", "p42", "Retired").await?;
    revision(&ns, &revisions, "other-00001", "other", "Retired").await?;
    let sink = Sink::start().await?;
    create_cleaner(
        &ns,
        RELEASE,
        json!({
            "ttl": "1s",
            "retry": {"period": "1h"},
            "helm": {"release": RELEASE, "delete": true},
            "targets": [
                {"name": "revisions", "includeWhenEvaluating": true, "delete": true,
                 "reference": {"apiGroup": "e2e.retention.dev", "version": "v1", "kind": "Revision",
                               "matchLabels": {"app": "p42"}}},
                {"name": "settings", "delete": true,
                 "reference": {"version": "v1", "kind": "ConfigMap", "name": "preview-42-settings"}}
            ],
            "cloudEventSink": sink.url,
            "conditions": ["!revisions.items.exists(r, r.status.phase == \"Active\")"]
        }),
    )
    .await?;

    // The TTL passes; the condition is false, so the Cleaner waits and says why.
    let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    eventually(
        Duration::from_secs(10),
        "the Cleaner waits on its condition",
        || async {
            let cleaner = cleaners.get(RELEASE).await?;
            let waiting = condition(&cleaner, "Waiting");
            Ok(waiting
                .is_some_and(|(status, reason, _)| status == "True" && reason == "ConditionsFalse"))
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cleaner = cleaners.get(RELEASE).await?;
    let status = cleaner.status.clone().context("a status")?;
    expect(
        status.resolved_targets
            == [
                "p42-00001.revisions.e2e.retention.dev/v1",
                "p42-00002.revisions.e2e.retention.dev/v1",
                "preview-42-settings.configmaps/v1",
            ],
        || format!("resolved targets: {:?}", status.resolved_targets),
    )?;
    let ready = condition(&cleaner, "Ready").context("Ready")?;
    expect(ready.0 == "True", || format!("Ready: {ready:?}"))?;
    ensure!(
        exists(&ns, &config_maps(), "preview-42-settings").await?,
        "deleted while the condition was false"
    );
    ensure!(
        exists(&ns, &revisions, "p42-00002").await?,
        "a revision deleted while the condition was false"
    );
    kube_retention_e2e::run(helm(&ns.env).args(["status", RELEASE, "--namespace", &ns.name]))?;

    // Retiring the active revision wakes the Cleaner at once, an hour before its period.
    let changed = Instant::now();
    set_phase(&ns, &revisions, "p42-00001", "Retired").await?;
    eventually(
        Duration::from_secs(10),
        "the group is cleaned and the Cleaner gone",
        || async {
            let left = [
                exists(&ns, &config_maps(), "preview-42-settings").await?,
                exists(&ns, &revisions, "p42-00001").await?,
                exists(&ns, &revisions, "p42-00002").await?,
                exists(&ns, &config_maps(), "preview-42-app").await?,
                exists(&ns, &services(), RELEASE).await?,
                cleaners.get_opt(RELEASE).await?.is_some(),
            ];
            Ok(left.iter().all(|left| !left))
        },
    )
    .await?;
    println!(
        "group cleaned {:?} after the target changed",
        changed.elapsed()
    );
    ensure!(
        exists(&ns, &revisions, "other-00001").await?,
        "a revision of another app was deleted"
    );
    ensure!(
        exists(&ns, &config_maps(), "preview-42-kept").await?,
        "the object annotated helm.sh/resource-policy: keep was deleted"
    );
    let status = kube_retention_e2e::output_with_input(
        helm(&ns.env).args(["status", RELEASE, "--namespace", &ns.name]),
        "",
    )?;
    let said = String::from_utf8_lossy(&status.stderr).into_owned();
    expect(
        !status.status.success() && said.contains("release: not found"),
        || format!("helm status after the clean: {said}"),
    )?;
    let listed =
        kube_retention_e2e::run(helm(&ns.env).args(["list", "--namespace", &ns.name, "--short"]))?;
    expect(listed.trim().is_empty(), || format!("helm list: {listed}"))?;

    eventually(
        Duration::from_secs(10),
        "the sink receives the CloudEvent",
        || async { Ok(!sink.received().is_empty()) },
    )
    .await?;
    let received = sink.received();
    let event = &received[0];
    let header = |name: &str| event.headers.get(name).map(String::as_str);
    expect(received.len() == 1, || format!("events: {received:?}"))?;
    expect(
        header("ce-type") == Some("dev.retention.cleaner.deleted"),
        || format!("{event:?}"),
    )?;
    let source = format!(
        "/apis/retention.dev/v1alpha1/namespaces/{}/cleaners/{RELEASE}",
        ns.name
    );
    expect(header("ce-source") == Some(source.as_str()), || {
        format!("{event:?}")
    })?;
    expect(header("ce-specversion") == Some("1.0"), || {
        format!("{event:?}")
    })?;
    expect(event.body["release"] == RELEASE, || format!("{event:?}"))?;
    let deleted = event.body["deleted"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for object in [
        "ConfigMap/preview-42-settings",
        "Revision/p42-00001",
        "Revision/p42-00002",
        "ConfigMap/preview-42-app",
        "Service/preview-42",
    ] {
        expect(deleted.contains(&json!(object)), || {
            format!("{object} not in {deleted:?}")
        })?;
    }
    Ok(())
}
