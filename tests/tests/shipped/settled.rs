//! Waiting for the webhook's Deployment to settle after a test upgraded or evicted something:
//! exactly its two replicas, none terminating, both Ready, and the disruption budget counting
//! them — so a test starts from the chart's steady state, not from the tail of a rollout.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::ListParams;
use kube_retention_e2e::cluster::SHIPPED_NAMESPACE;

use crate::support::TestNamespace;
use crate::workloads::until_some;

pub const WEBHOOK_PODS: &str = "app.kubernetes.io/name=kube-retention-webhook";

/// The two webhook pods once settled: `(name, IP, the webhook container's restarts)`, sorted.
pub async fn webhook_pods(ns: &TestNamespace) -> Result<Vec<(String, String, i32)>> {
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let budgets: Api<PodDisruptionBudget> =
        Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let listed = until_some(
        Duration::from_secs(120),
        "the webhook pods settled",
        || async {
            let listed = pods
                .list(&ListParams::default().labels(WEBHOOK_PODS))
                .await?;
            let settled = listed.items.len() == 2 && listed.items.iter().all(ready);
            let budget = budgets.get("kube-retention-webhook").await?;
            let counted = budget.status.is_some_and(|status| {
                status.current_healthy == 2
                    && status.disruptions_allowed == 1
                    && status.observed_generation == budget.metadata.generation
            });
            Ok((settled && counted).then_some(listed))
        },
    )
    .await?;
    let mut found: Vec<(String, String, i32)> = listed
        .items
        .into_iter()
        .map(|pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let status = pod.status.unwrap_or_default();
            let restarts = status
                .container_statuses
                .iter()
                .flatten()
                .find(|container| container.name == "webhook")
                .map_or(-1, |container| container.restart_count);
            (name, status.pod_ip.unwrap_or_default(), restarts)
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Ready and not terminating.
pub fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|condition| condition.type_ == "Ready" && condition.status == "True")
            })
}
