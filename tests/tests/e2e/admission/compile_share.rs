//! Each namespace's share of the webhook's compile time, through the real API server and real
//! kubectl: a namespace that keeps sending the largest expressions is refused uncompiled with
//! `429 TooManyRequests`, its namespace and when to try again named, and the API server passes
//! the webhook's `retryAfterSeconds` on as `Retry-After`, so `kubectl apply` waits and applies by
//! itself. Another namespace compiles meanwhile.

use anyhow::{Result, bail, ensure};
use kube::Api;
use kube::api::PostParams;
use kube_retention_common::cleaner::Cleaner;
use serde_json::{Value, json};

use crate::support::TestNamespace;

/// A Cleaner of sixteen conditions, each an `&&` chain of comparisons near the token bound:
/// the costliest shape to compile (about 12 ms each in a debug build).
fn largest_cleaner(name: &str) -> Result<Cleaner> {
    let condition = (0..99)
        .map(|n| format!("settings.items.size() > {n}"))
        .collect::<Vec<_>>()
        .join(" && ");
    Ok(serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name},
        "spec": {"targets": [{"name": "settings", "includeWhenEvaluating": true,
                              "reference": {"version": "v1", "kind": "ConfigMap"}}],
                 "conditions": vec![condition; 16]}}))?)
}

fn small_cleaner(name: &str) -> Value {
    json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name},
        "spec": {"ttl": "1h",
                 "targets": [{"name": "settings", "includeWhenEvaluating": true,
                              "reference": {"version": "v1", "kind": "ConfigMap", "name": name}}],
                 "conditions": ["settings.items.size() == 0"]}})
}

/// Sends the largest Cleaners, dry run, one after another until the webhook refuses one for
/// the namespace's share and says to wait two seconds or more: what it said.
async fn spend_the_share(ns: &TestNamespace) -> Result<String> {
    let api: Api<Cleaner> = Api::namespaced(ns.env.impatient_client().await?, &ns.name);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for n in 0..200 {
        match api
            .create(&dry_run, &largest_cleaner(&format!("large-{n}"))?)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 429 => {
                ensure!(
                    status.reason == "TooManyRequests"
                        && status.message.contains(&format!(
                            "namespace {} has used its share of kube-retention's time for \
                             compiling CEL",
                            ns.name
                        )),
                    "the refusal names the namespace and its share: {status:?}"
                );
                let waits_long_enough = ["in 1s", "in 0s"]
                    .iter()
                    .all(|short| !status.message.ends_with(short));
                if waits_long_enough {
                    return Ok(status.message);
                }
            }
            Err(error) => bail!("the largest Cleaner {n}: {error}"),
        }
    }
    bail!("200 of the largest Cleaners were compiled without the namespace's share refusing one")
}

pub async fn refused_then_applied_by_kubectl(ns: TestNamespace) -> Result<()> {
    let other = TestNamespace::create(&ns.env, "compile-share-other").await?;
    let outcome = refused_then_applied(&ns, &other).await;
    other.delete().await;
    outcome
}

async fn refused_then_applied(ns: &TestNamespace, other: &TestNamespace) -> Result<()> {
    let refusal = spend_the_share(ns).await?;
    // The other namespace compiles while this one is in debt.
    let (applied, said) = kube_retention_e2e::outcome_with_input(
        other.kubectl().args(["apply", "-f", "-"]),
        &small_cleaner("elsewhere").to_string(),
    )?;
    ensure!(applied, "the other namespace's Cleaner: {said}");
    ensure!(
        !said.contains("Retry-After"),
        "the other namespace was not held up: {said}"
    );
    // kubectl is refused, waits as the webhook said and applies, by itself.
    let (applied, said) = kube_retention_e2e::outcome_with_input(
        ns.kubectl().args(["apply", "-v=4", "-f", "-"]),
        &small_cleaner("waited").to_string(),
    )?;
    ensure!(
        applied && said.contains("Got a Retry-After response"),
        "kubectl applies after waiting (the webhook said: {refusal}): {said}"
    );
    Ok(())
}
