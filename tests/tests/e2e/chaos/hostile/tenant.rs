//! Namespace A, the hostile tenant: its Jobs (built past the sizes the cost estimate assumes),
//! the stream of edits that keeps them changing, and its retention settings — the policy with
//! the worst expression admission lets through, and Cleaners whose sinks point at denied
//! addresses — which it can add and take away, so B is measured beside A's workload with and
//! without them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube_retention_common::api::RetentionPolicy;
use kube_retention_common::cleaner::Cleaner;
use serde_json::{Value, json};

use crate::cleaners::create_cleaner;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second};

/// Annotations on each of A's Jobs: far past the 256 items the cost estimate assumes, and
/// short, so that the objects are small (6 KB) and cost the API server little.
pub const ANNOTATIONS: usize = 700;
/// Two loops over the annotations: 256 × 256 items as estimated (under the limit), 700 × 700
/// as built (about three times over it).
const HOSTILE_MATCH: &str =
    "object.metadata.annotations.all(a, object.metadata.annotations.exists(b, b == a))";
/// The hostile policy's name.
const POLICY: &str = "hostile";
/// How long A's own statuses and Events may take to say what happened. A's evaluations go at
/// A's share of the evaluator (5% of a core, `evaluator/src/lib.rs`) and A queues
/// seconds of work at once: ten evaluations stopped at their limit, a search over sixteen loops
/// at some twenty points, a megabyte ConfigMap. One round of A's turns took 26 s on this
/// machine's debug build under two busy cores, and the costly Cleaner waits a round or two: A
/// slows only itself, and what this scenario holds to a time is B's delay, not A's.
pub const A_SAYS_WITHIN: Duration = Duration::from_secs(240);

/// Finished Jobs in the tenant's namespace, each with `ANNOTATIONS` annotations.
pub async fn jobs(tenant: &TestNamespace) -> Result<Vec<String>> {
    let annotations: serde_json::Map<String, Value> = (0..ANNOTATIONS)
        .map(|index| (format!("a{index:03}"), json!("")))
        .collect();
    let names: Vec<String> = (0..10).map(|index| format!("heavy-{index}")).collect();
    for name in &names {
        create_job_in(
            &tenant.env.client,
            &tenant.name,
            name,
            Value::Object(annotations.clone()),
        )
        .await?;
        finish_job(&tenant.env.client, &tenant.name, name, true, now_second()).await?;
    }
    Ok(names)
}

/// Edits the tenant's Jobs, five a second, until aborted: under the hostile policy each edit is
/// an evaluation stopped at its limit, which keeps the evaluator busy half the time or more.
pub async fn churn(tenant: TestNamespace, names: Vec<String>, edits: Arc<AtomicUsize>) {
    let jobs: Api<Job> = Api::namespaced(tenant.env.client.clone(), &tenant.name);
    for round in 0.. {
        for name in &names {
            let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
            if jobs
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                edits.fetch_add(1, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The policy over the tenant's Jobs, and one Cleaner per `(name, sink)`.
pub async fn add_settings(tenant: &TestNamespace, sinks: &[(&str, String)]) -> Result<Vec<String>> {
    let policy: RetentionPolicy = serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": POLICY},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "match": HOSTILE_MATCH, "ttlAfterSucceeded": "1s"}}))?;
    Api::<RetentionPolicy>::namespaced(tenant.env.client.clone(), &tenant.name)
        .create(&PostParams::default(), &policy)
        .await
        .context("the hostile policy is admitted: its estimate is within the limit")?;
    let mut uids = Vec::new();
    for (name, sink) in sinks {
        uids.push(cleaner(tenant, name, sink).await?);
    }
    Ok(uids)
}

/// Takes the policy and the Cleaners away again.
pub async fn remove_settings(tenant: &TestNamespace, sinks: &[(&str, String)]) -> Result<()> {
    let client = &tenant.env.client;
    Api::<RetentionPolicy>::namespaced(client.clone(), &tenant.name)
        .delete(POLICY, &DeleteParams::default())
        .await?;
    let cleaners: Api<Cleaner> = Api::namespaced(client.clone(), &tenant.name);
    for (name, _) in sinks {
        cleaners.delete(name, &DeleteParams::default()).await.ok();
    }
    Ok(())
}

/// A Cleaner that cleans at once (one ConfigMap), announces it to `sink` and retires: its uid.
async fn cleaner(tenant: &TestNamespace, name: &str, sink: &str) -> Result<String> {
    let config_map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<ConfigMap>::namespaced(tenant.env.client.clone(), &tenant.name)
        .create(&PostParams::default(), &config_map)
        .await?;
    let spec = json!({
        "ttl": "1s",
        "targets": [{"name": "settings", "delete": true,
                     "reference": {"version": "v1", "kind": "ConfigMap", "name": name}}],
        "cloudEventSink": sink,
    });
    create_cleaner(tenant, name, spec).await
}

/// Waits for the hostile policy to say `Ready=False`, `CostLimitExceeded`, and answers its
/// message.
pub async fn stopped_at_its_limit(tenant: &TestNamespace) -> Result<String> {
    let policies: Api<RetentionPolicy> = Api::namespaced(tenant.env.client.clone(), &tenant.name);
    let stopped = eventually(
        A_SAYS_WITHIN,
        "the hostile policy Ready=False, CostLimitExceeded",
        || async {
            let policy = policies.get(POLICY).await?;
            Ok(ready(&policy).is_some_and(|(status, reason, _)| {
                status == "False" && reason == "CostLimitExceeded"
            }))
        },
    )
    .await;
    if let Err(error) = stopped {
        let status = policies.get(POLICY).await?.status;
        let log = kube_retention_e2e::process::tracked(
            &tenant.env.cluster.layout.state_dir,
            &[kube_retention_e2e::components::CONTROLLER],
        )
        .pop()
        .and_then(|controller| controller.log_path())
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        anyhow::bail!(
            "{error:#}; its status: {status:?}; the controller's log ends:\n{}",
            tail.join("\n")
        );
    }
    let (_, _, message) = ready(&policies.get(POLICY).await?).context("Ready")?;
    Ok(message)
}

/// Waits for an Event on Cleaner `cleaner` saying its sink was refused;
/// `uid` tells this Cleaner from one of the same name an earlier phase created (and the
/// Cleaner may have retired already).
pub async fn refused_event(tenant: &TestNamespace, cleaner: &str, uid: &str) -> Result<()> {
    eventually(
        A_SAYS_WITHIN,
        &format!("an Event on Cleaner {cleaner} saying its sink was refused"),
        || async {
            let events = kube_retention_e2e::run(tenant.kubectl().args([
                "get",
                "events",
                "--field-selector",
                &format!(
                    "involvedObject.name={cleaner},involvedObject.kind=Cleaner,\
                     involvedObject.uid={uid}"
                ),
                "-o",
                "jsonpath={.items[*].message}",
            ]))?;
            Ok(events.contains("refused by the sink policy"))
        },
    )
    .await
}

fn ready(policy: &RetentionPolicy) -> Option<(String, String, String)> {
    let condition = policy
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|condition| condition.type_ == "Ready")?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    ))
}
