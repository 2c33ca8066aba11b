//! Evictions of the webhook's pods (what `kubectl drain` asks for, pod by pod, retrying on 429)
//! against the chart's PodDisruptionBudget: the first is granted; once the budget has counted
//! it, a second while the first's replacement is not Ready yet is refused (429); once the
//! replacement is Ready, the second is granted too. Throughout, at least one webhook pod is Ready
//! (sampled every 200 ms) and a trickle of admission requests sees no error.
//!
//! Evictions go through kubectl, once each: kube-rs's client retries a 429 by itself (its
//! `RetryPolicy`) until the replacement is Ready, and the refusal would never be seen.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::ListParams;
use kube_retention_e2e::cluster::SHIPPED_NAMESPACE;
use libtest_mimic::Trial;

use crate::settled::{self, WEBHOOK_PODS};
use crate::support::{Env, TestNamespace};
use crate::trickle::Trickle;
use crate::workloads::eventually;

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "evicting_webhook_pods_respects_the_disruption_budget_and_admission_keeps_answering",
        evictions,
    )]
}

async fn evictions(ns: TestNamespace) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let original: Vec<String> = settled::webhook_pods(&ns)
        .await?
        .into_iter()
        .map(|(name, _, _)| name)
        .collect();
    let trickle = Trickle::start(&ns)?;
    let sampler = ReadySampler::start(pods.clone());
    let (first, second) = (&original[0], &original[1]);
    let (granted, said) = evict(&ns, first)?;
    ensure!(granted, "evicting {first}: {said}");
    let budgets: Api<PodDisruptionBudget> =
        Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    eventually(
        Duration::from_secs(10),
        "the budget counts the eviction",
        || async {
            let budget = budgets.get("kube-retention-webhook").await?;
            Ok(budget
                .status
                .is_some_and(|status| status.disruptions_allowed == 0))
        },
    )
    .await?;
    let (granted, said) = evict(&ns, second)?;
    ensure!(
        !granted && said.contains("TooManyRequests"),
        "evicting {second} with {first} going: {said}"
    );
    eventually(
        Duration::from_secs(90),
        "a Ready replacement for the evicted pod",
        || async {
            let ready = ready_pods(&pods).await?;
            Ok(ready.len() == 2 && !ready.contains(first))
        },
    )
    .await?;
    // Granted again once the disruption controller has counted the replacement.
    eventually(
        Duration::from_secs(60),
        "the second eviction granted",
        || async { Ok(evict(&ns, second)?.0) },
    )
    .await?;
    eventually(
        Duration::from_secs(90),
        "a Ready replacement for the second pod",
        || async {
            let ready = ready_pods(&pods).await?;
            Ok(ready.len() == 2 && !ready.contains(second))
        },
    )
    .await?;
    let fewest = sampler.stop();
    ensure!(
        fewest >= 1,
        "at one moment {fewest} webhook pods were Ready"
    );
    let tally = trickle.stop();
    ensure!(
        tally.failures.is_empty() && tally.answered > 0,
        "admission failed {}",
        tally.summary()
    );
    Ok(())
}

/// Posts a policy/v1 Eviction for the pod `name`, as `kubectl drain` does, once: answers
/// whether it was granted, and the API server's answer. (kube-rs's client retries a 429 by
/// itself, which would hide the refusal this test looks for.)
fn evict(ns: &TestNamespace, name: &str) -> Result<(bool, String)> {
    let eviction = serde_json::json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": SHIPPED_NAMESPACE}
    });
    kube_retention_e2e::outcome_with_input(
        ns.env.kubectl().args([
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{SHIPPED_NAMESPACE}/pods/{name}/eviction"),
            "-f",
            "-",
        ]),
        &eviction.to_string(),
    )
}

/// Counts Ready webhook pods every 200 ms and keeps the fewest seen.
struct ReadySampler {
    fewest: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadySampler {
    fn start(pods: Api<Pod>) -> Self {
        let fewest = Arc::new(AtomicUsize::new(usize::MAX));
        let seen = fewest.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(ready) = ready_pods(&pods).await {
                    seen.fetch_min(ready.len(), Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { fewest, task }
    }

    fn stop(self) -> usize {
        self.task.abort();
        self.fewest.load(Ordering::Relaxed)
    }
}

/// The webhook pods that are Ready and not terminating, by name.
async fn ready_pods(pods: &Api<Pod>) -> Result<Vec<String>> {
    let listed = pods
        .list(&ListParams::default().labels(WEBHOOK_PODS))
        .await?;
    let mut ready: Vec<String> = listed
        .items
        .into_iter()
        .filter(settled::ready)
        .filter_map(|pod| pod.metadata.name)
        .collect();
    ready.sort();
    Ok(ready)
}
