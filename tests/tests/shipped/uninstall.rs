//! `helm uninstall` of the release: the chart's pre-delete hook deletes the webhook
//! configurations before Helm deletes anything else (no write waits on a webhook that is going
//! away), then the certificate Secret the sidecar wrote, which Helm does not own; the hook's own
//! objects go once it succeeded. The audit log gives the order. Run last: the release is gone
//! after it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube_retention_e2e::cluster::{CHART_RELEASE, SHIPPED_NAMESPACE};
use libtest_mimic::Trial;
use serde_json::Value;

use crate::audit;
use crate::support::{Env, TestNamespace};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "helm_uninstall_unregisters_the_webhook_first_and_removes_its_certificate_secret",
        uninstall,
    )]
}

const HOOK: &str = "kube-retention-uninstall";
const SECRET: &str = "kube-retention-webhook-tls";

/// Where in the audit log the first completed, successful DELETE `matching` is.
fn first_delete(events: &[Value], matching: impl Fn(&Value) -> bool) -> Option<usize> {
    events.iter().position(|event| {
        audit::completed(event, "delete")
            && event["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|code| code < 300)
            && matching(event)
    })
}

async fn uninstall(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    // Only what the uninstall asked: earlier tests deleted pods and more.
    let before = audit::events(&ns)?.len();
    kube_retention_e2e::run(
        cluster
            .helm()
            .args(["uninstall", CHART_RELEASE, "--namespace", SHIPPED_NAMESPACE])
            // The hooks' limit. No --wait: how long the pods take to terminate is not what
            // this test is about (it once took Helm's wait past 3 minutes on a loaded CI run).
            .args(["--timeout", "3m"]),
    )
    .context("helm uninstall")?;
    let hook = format!("system:serviceaccount:{SHIPPED_NAMESPACE}:{HOOK}");
    let mut events = audit::events(&ns)?;
    let events = events.split_off(before.min(events.len()));
    let by_hook = |resource: &'static str, name: &'static str| {
        let hook = hook.clone();
        move |event: &Value| {
            event["user"]["username"] == hook.as_str()
                && event["objectRef"]["resource"] == resource
                && event["objectRef"]["name"] == name
        }
    };
    let validating = first_delete(
        &events,
        by_hook("validatingwebhookconfigurations", "kube-retention"),
    )
    .context("the hook deleted no ValidatingWebhookConfiguration")?;
    let mutating = first_delete(
        &events,
        by_hook("mutatingwebhookconfigurations", "kube-retention"),
    )
    .context("the hook deleted no MutatingWebhookConfiguration")?;
    let secret = first_delete(&events, by_hook("secrets", SECRET))
        .context("the hook deleted no certificate Secret")?;
    let helm_first = first_delete(&events, |event| {
        event["user"]["username"] != hook.as_str()
            && event["objectRef"]["namespace"] == SHIPPED_NAMESPACE
            && ["deployments", "services"]
                .contains(&event["objectRef"]["resource"].as_str().unwrap_or_default())
    })
    .context("helm deleted no Deployment or Service")?;
    ensure!(
        validating < helm_first && mutating < helm_first && secret < helm_first,
        "the audit log's order: validating {validating}, mutating {mutating}, secret {secret}, \
         helm's first deletion {helm_first}"
    );
    for (kind, namespaced, name) in [
        ("validatingwebhookconfiguration", false, "kube-retention"),
        ("mutatingwebhookconfiguration", false, "kube-retention"),
        ("secret", true, SECRET),
        ("pod", true, HOOK),
        ("serviceaccount", true, HOOK),
        ("clusterrole", false, HOOK),
        ("deployment", true, "kube-retention-webhook"),
    ] {
        let what = format!("{kind} {name} gone after the uninstall");
        crate::workloads::eventually(Duration::from_secs(120), &what, || async move {
            let mut get = cluster.kubectl();
            get.args(["get", kind, name, "--ignore-not-found", "-o", "name"]);
            if namespaced {
                get.args(["--namespace", SHIPPED_NAMESPACE]);
            }
            Ok(kube_retention_e2e::run(&mut get)?.trim().is_empty())
        })
        .await?;
    }
    Ok(())
}
