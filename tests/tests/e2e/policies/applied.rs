//! Policies at work on the real cluster: a ClusterRetentionPolicy with CEL finish rules for a
//! kind defined here, a RetentionPolicy deleting un-annotated Jobs with limits per `groupBy`
//! value, dry run, and a policy for a kind the controller may not delete yet.

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, GroupVersionKind, Patch, PatchParams, PostParams, ResourceExt,
};
use serde_json::{Value, json};

use crate::kinds::{GROUP, define_kind, grant};
use crate::support::{TestNamespace, object};
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

fn policies(cluster: bool) -> ApiResource {
    let (kind, plural) = if cluster {
        ("ClusterRetentionPolicy", "clusterretentionpolicies")
    } else {
        ("RetentionPolicy", "retentionpolicies")
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("retention.dev", "v1alpha1", kind),
        plural,
    )
}

pub fn apply(ns: &TestNamespace, manifest: &Value) -> Result<()> {
    kube_retention_e2e::run_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &manifest.to_string(),
    )?;
    Ok(())
}

/// The policy's status, once it has one.
pub async fn status(ns: &TestNamespace, cluster: bool, name: &str) -> Result<Value> {
    let api: Api<kube::api::DynamicObject> = if cluster {
        Api::all_with(ns.env.client.clone(), &policies(true))
    } else {
        ns.dynamic(&policies(false))
    };
    Ok(api.get(name).await?.data["status"].clone())
}

pub fn ready(status: &Value) -> (String, String, String) {
    let condition = status["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    let text = |key: &str| condition[key].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"), text("message"))
}

pub async fn cluster_policy_with_cel(ns: TestNamespace) -> Result<()> {
    let pipelines = define_kind(&ns.env, "Pipeline").await?;
    grant(&ns.env, "pipelines")?;
    kube_retention_e2e::run(ns.env.kubectl().args([
        "label",
        "namespace",
        &ns.name,
        &format!("e2e-policy={}", ns.name),
    ]))?;
    let other = format!("{}-other", ns.name);
    let namespaces: Api<Namespace> = Api::all(ns.env.client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(other.clone());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    let outcome = cel_rules(&ns, &pipelines, &other).await;
    namespaces
        .delete(&other, &DeleteParams::background())
        .await
        .ok();
    kube_retention_e2e::run(
        ns.env
            .kubectl()
            .args(["delete", "clusterretentionpolicy", &ns.name]),
    )?;
    outcome
}

async fn cel_rules(ns: &TestNamespace, pipelines: &ApiResource, other: &str) -> Result<()> {
    apply(
        ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "ClusterRetentionPolicy",
            "metadata": {"name": ns.name},
            "spec": {"resources": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Pipeline"}],
                     "namespaceSelector": {"matchLabels": {"e2e-policy": ns.name}},
                     "finished": {"succeeded": "object.status.phase == 'Done'",
                                  "failed": "object.status.phase == 'Broken'",
                                  "at": "timestamp(object.status.finishedAt)"},
                     "ttlAfterSucceeded": "2s", "ttlAfterFailed": "2s"}}),
    )?;
    let here = ns.dynamic(pipelines);
    let there: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ns.env.client.clone(), other, pipelines);
    let at = now_second().to_string();
    for (api, name, phase, annotations) in [
        (&here, "done", "Done", json!({})),
        (&here, "broken", "Broken", json!({})),
        (&here, "running", "Running", json!({})),
        (&here, "kept", "Done", json!({"retention.dev/keep": "true"})),
        (&there, "elsewhere", "Done", json!({})),
    ] {
        let pipeline = object(
            pipelines,
            json!({"metadata": {"name": name, "annotations": annotations}}),
        )?;
        api.create(&PostParams::default(), &pipeline).await?;
        let status = json!({"status": {"phase": phase, "finishedAt": at}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    eventually(
        Duration::from_secs(20),
        "finished Pipelines in the selected namespace are deleted",
        || async {
            Ok(here.get_opt("done").await?.is_none() && here.get_opt("broken").await?.is_none())
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        here.get_opt("running").await?.is_some(),
        "a running Pipeline was deleted"
    );
    ensure!(
        here.get_opt("kept").await?.is_some(),
        "keep lost to a policy"
    );
    ensure!(
        there.get_opt("elsewhere").await?.is_some(),
        "an unselected namespace was touched"
    );
    eventually(
        Duration::from_secs(15),
        "the status counts the deletions",
        || async {
            let status = status(ns, true, &ns.name).await?;
            Ok(ready(&status).0 == "True" && status["deletions"] == 2)
        },
    )
    .await
}

pub async fn jobs_with_limits(ns: TestNamespace) -> Result<()> {
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "jobs", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttlAfterFailed": "2s", "succeededLimit": 1, "groupBy": "app"}}),
    )?;
    let client = &ns.env.client;
    for (name, app, outcome) in [
        ("failed", "a", Some(false)),
        ("a-old", "a", Some(true)),
        ("b-only", "b", Some(true)),
        ("running", "a", None),
        ("a-new", "a", Some(true)),
    ] {
        create_job_in(client, &ns.name, name, json!({})).await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
        let label = json!({"metadata": {"labels": {"app": app}}});
        jobs.patch(name, &PatchParams::default(), &Patch::Merge(&label))
            .await?;
        if let Some(succeeded) = outcome {
            finish_job(client, &ns.name, name, succeeded, now_second()).await?;
        }
        // Distinct creation seconds: "newest" is then the last created.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    eventually(
        Duration::from_secs(20),
        "the failed Job and the older succeeded one of app a go",
        || async {
            let mut names: Vec<String> = jobs
                .list(&Default::default())
                .await?
                .into_iter()
                .map(|job| job.name_any())
                .collect();
            names.sort();
            Ok(names == ["a-new", "b-only", "running"])
        },
    )
    .await
}

pub async fn dry_run(ns: TestNamespace) -> Result<()> {
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "rehearsal", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttlAfterSucceeded": "1s", "dryRun": true}}),
    )?;
    create_job_in(&ns.env.client, &ns.name, "done", json!({})).await?;
    finish_job(&ns.env.client, &ns.name, "done", true, now_second()).await?;
    eventually(
        Duration::from_secs(20),
        "the status names the Job",
        || async {
            let status = status(&ns, false, "rehearsal").await?;
            Ok(status["wouldDelete"][0]["name"] == "done"
                && status["wouldDelete"][0]["kind"] == "Job.batch"
                && status["wouldDelete"][0]["reason"] == "ttl")
        },
    )
    .await?;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(jobs.get_opt("done").await?.is_some(), "a dry run deleted");
    Ok(())
}

pub async fn ungranted_kind(ns: TestNamespace) -> Result<()> {
    let sprockets = define_kind(&ns.env, "Sprocket").await?;
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "sprockets", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Sprocket"}],
                     "ttl": "1s"}}),
    )?;
    let needed = format!("the controller may not list, watch, patch, delete sprockets.{GROUP}");
    eventually(
        Duration::from_secs(20),
        "Ready=False names the permission",
        || async {
            let (status, reason, message) = ready(&status(&ns, false, "sprockets").await?);
            Ok(status == "False" && reason == "MissingPermissions" && message.contains(&needed))
        },
    )
    .await?;
    let api = ns.dynamic(&sprockets);
    api.create(
        &PostParams::default(),
        &object(&sprockets, json!({"metadata": {"name": "s"}}))?,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        api.get_opt("s").await?.is_some(),
        "deleted without permission?"
    );
    grant(&ns.env, "sprockets")?;
    eventually(
        Duration::from_secs(20),
        "Ready once granted, and the object goes",
        || async {
            let (status, ..) = ready(&status(&ns, false, "sprockets").await?);
            Ok(status == "True" && api.get_opt("s").await?.is_none())
        },
    )
    .await
}
