//! What kube-retention is for, done by the chart's pods: `kubectl apply` of an invalid Build is
//! denied through the webhook's Service with the text the webhook library writes, and a
//! BuildRun that inherits its Build's TTL is deleted on time by the controller pod, unstamped as
//! the chart's default has it.

use anyhow::{Context, Result, ensure};
use jiff::SignedDuration;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use kube::api::PostParams;
use kube_retention_common::Registry;
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, object, shipwright};
use crate::workloads::{Stamp, expect_deleted_on_time, finish_buildrun, now_second};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "an_invalid_build_is_denied_through_the_webhook_service_with_every_error",
            denied_through_the_service,
        ),
        env.trial(
            "a_buildrun_inherits_its_builds_ttl_and_the_controller_pod_deletes_it_on_time",
            deleted_on_time,
        ),
    ]
}

async fn denied_through_the_service(ns: TestNamespace) -> Result<()> {
    // Admission reaches the pods through the chart's Service: no URL, no host process.
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.env.client.clone());
    for configuration in configurations.list(&Default::default()).await? {
        for webhook in configuration.webhooks.iter().flatten() {
            let service = webhook.client_config.service.as_ref();
            ensure!(
                webhook.client_config.url.is_none()
                    && service.is_some_and(|service| service.name == "kube-retention-webhook"),
                "{} calls {:?}",
                webhook.name,
                webhook.client_config
            );
        }
    }
    let build = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "Build",
        "metadata": {"name": "invalid", "namespace": ns.name},
        "spec": {"source": {"type": "Git", "git": {"url": "https://github.com/shipwright-io/sample-go"}},
                 "strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
                 "output": {"image": "registry.example/invalid:latest"},
                 "retention": {"ttlAfterSucceeded": "2 weeks", "failedLimit": 500}}
    });
    let expected = kube_retention_webhook::validate::new_errors(Registry::builtin(), &build, None);
    ensure!(
        expected.len() == 2,
        "the fixture has two errors: {expected:?}"
    );
    let output = kube_retention_e2e::output_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &build.to_string(),
    )?;
    let said = String::from_utf8_lossy(&output.stderr);
    ensure!(!output.status.success(), "apply must fail: {said}");
    for error in &expected {
        ensure!(
            said.contains(&error.to_string()),
            "{error} missing from: {said}"
        );
    }
    ensure!(
        ns.dynamic(&shipwright("Build"))
            .get_opt("invalid")
            .await?
            .is_none(),
        "nothing created"
    );
    Ok(())
}

async fn deleted_on_time(ns: TestNamespace) -> Result<()> {
    let build = object(
        &shipwright("Build"),
        json!({"metadata": {"name": "app"},
               "spec": {"source": {"type": "Git", "git": {"url": "https://github.com/shipwright-io/sample-go"}},
                        "strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
                        "output": {"image": "registry.example/app:latest"},
                        "retention": {"ttlAfterSucceeded": "4s"}}}),
    )?;
    ns.dynamic(&shipwright("Build"))
        .create(&PostParams::default(), &build)
        .await
        .context("creating the Build")?;
    let runs = ns.dynamic(&shipwright("BuildRun"));
    // No retention of its own: it inherits the Build's.
    let run = object(
        &shipwright("BuildRun"),
        json!({"metadata": {"name": "run", "labels": {"build.shipwright.io/name": "app"}},
               "spec": {"build": {"name": "app"}}}),
    )?;
    runs.create(&PostParams::default(), &run).await?;
    let finished = now_second();
    finish_buildrun(&ns, "run", true, finished).await?;
    // The chart's default: no stamp, one request per deletion.
    expect_deleted_on_time(
        &ns,
        "run",
        finished + SignedDuration::from_secs(4),
        Stamp::Absent,
    )
    .await
}
