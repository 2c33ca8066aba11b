//! A forged Helm release on the real cluster. The real helm installs the preview chart as
//! release `forged`; then a record of a second revision is written by hand, as anyone who may
//! write Secrets could, listing the chart's objects and also a PersistentVolumeClaim Helm never
//! installed and a ConfigMap of another release. A Cleaner uninstalling the release deletes the
//! chart's objects (the real helm annotated them) and both records, leaves the PVC and the other
//! release's ConfigMap, and its `HelmObjectsSkipped` Event names each and why.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use kube::Api;
use kube::api::PostParams;
use kube_retention_common::cleaner::Cleaner;
use kube_retention_common::cleaner::helm::{RELEASE_NAME, RELEASE_NAMESPACE};
use serde_json::json;

use super::{config_maps, create_cleaner, events, exists, expect, grant_helm, helm, services};
use crate::support::TestNamespace;
use crate::workloads::eventually;

const RELEASE: &str = "forged";
const VICTIM: &str = "victim-data";
const OTHERS: &str = "other-settings";

pub async fn forged_release(ns: TestNamespace) -> Result<()> {
    grant_helm(&ns)?;
    let chart = ns.env.cluster.layout.repo_root.join("tests/charts/preview");
    kube_retention_e2e::run(
        helm(&ns.env)
            .args(["install", RELEASE, "--namespace", &ns.name, "--wait=false"])
            .arg(&chart),
    )?;
    let client = ns.env.client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns.name);
    let claim = json!({"metadata": {"name": VICTIM},
                       "spec": {"accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Mi"}}}});
    claims
        .create(&PostParams::default(), &serde_json::from_value(claim)?)
        .await
        .context("creating the PVC")?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let others = json!({"metadata": {"name": OTHERS, "annotations": {
        RELEASE_NAME: "other", RELEASE_NAMESPACE: ns.name}}});
    maps.create(&PostParams::default(), &serde_json::from_value(others)?)
        .await
        .context("creating another release's ConfigMap")?;

    let manifest = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {RELEASE}-app\n\
         ---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {RELEASE}\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {VICTIM}\n\
         ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {OTHERS}\n"
    );
    forge_record(&ns, &manifest).await?;
    create_cleaner(
        &ns,
        RELEASE,
        json!({"ttl": "1s", "helm": {"release": RELEASE, "delete": true}}),
    )
    .await?;

    let cleaners: Api<Cleaner> = Api::namespaced(client.clone(), &ns.name);
    eventually(
        Duration::from_secs(20),
        "the release is uninstalled and the Cleaner gone",
        || async {
            let left = [
                exists(&ns, &config_maps(), &format!("{RELEASE}-app")).await?,
                exists(&ns, &services(), RELEASE).await?,
                cleaners.get_opt(RELEASE).await?.is_some(),
            ];
            Ok(left.iter().all(|left| !left))
        },
    )
    .await?;
    ensure!(
        claims.get_opt(VICTIM).await?.is_some(),
        "the PVC Helm never installed was deleted"
    );
    ensure!(
        maps.get_opt(OTHERS).await?.is_some(),
        "another release's ConfigMap was deleted"
    );
    let status = kube_retention_e2e::output_with_input(
        helm(&ns.env).args(["status", RELEASE, "--namespace", &ns.name]),
        "",
    )?;
    let said = String::from_utf8_lossy(&status.stderr).into_owned();
    expect(
        !status.status.success() && said.contains("release: not found"),
        || format!("helm status after the clean, both records deleted: {said}"),
    )?;

    let namespace = &ns.name;
    let expected = [
        format!("PersistentVolumeClaim/{VICTIM}: it has no {RELEASE_NAME} annotation"),
        format!("ConfigMap/{OTHERS}: its {RELEASE_NAME} is \"other\", not \"{RELEASE}\""),
        format!("annotated {RELEASE_NAME}={RELEASE} and {RELEASE_NAMESPACE}={namespace}"),
    ];
    eventually(
        Duration::from_secs(10),
        "a HelmObjectsSkipped Event names what was left and why",
        || async {
            Ok(events(&ns, RELEASE)?.iter().any(|(reason, message)| {
                reason == "HelmObjectsSkipped" && expected.iter().all(|it| message.contains(it))
            }))
        },
    )
    .await
    .with_context(|| format!("Events: {:?}", events(&ns, RELEASE)))
}

/// Writes revision 2 of the release by hand, listing `manifest`: a Secret named and labelled as
/// Helm names and labels its records (Helm gzips the release; the controller reads it either way).
async fn forge_record(ns: &TestNamespace, manifest: &str) -> Result<()> {
    let release = json!({"name": RELEASE, "namespace": ns.name, "version": 2,
                         "info": {"status": "deployed"}, "manifest": manifest, "hooks": []});
    let encoded = base64::engine::general_purpose::STANDARD.encode(release.to_string());
    let record: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("sh.helm.release.v1.{RELEASE}.v2"),
                     "labels": {"owner": "helm", "name": RELEASE, "version": "2",
                                "status": "deployed"}},
        "type": "helm.sh/release.v1"}))?;
    let record = Secret {
        data: Some([("release".to_owned(), ByteString(encoded.into_bytes()))].into()),
        ..record
    };
    let secrets: Api<Secret> = Api::namespaced(ns.env.client.clone(), &ns.name);
    secrets
        .create(&PostParams::default(), &record)
        .await
        .context("forging the release record")?;
    Ok(())
}
