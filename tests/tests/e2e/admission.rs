//! The webhook through the real API server and real kubectl: denials at `kubectl apply` time,
//! TTL inheritance, expires-at stamping, client authentication (`admission/client_auth.rs`),
//! each namespace's share of the compile time (`admission/compile_share.rs`), and what happens
//! while the webhook is down.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use kube::api::ResourceExt;
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace, shipwright};

mod client_auth;
mod compile_share;
mod inheritance;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "apply_denies_a_non_go_duration_naming_field_and_value",
            non_go_duration,
        ),
        env.trial("apply_denies_a_limit_above_100", limit_above_100),
        env.trial("apply_reports_two_errors_together", two_errors),
        env.trial(
            "valid_go_durations_and_limit_100_are_accepted",
            valid_settings,
        ),
        env.trial("server_side_dry_run_gets_the_same_answers", dry_run),
        env.trial(
            "buildruns_inherit_build_ttls_unless_they_set_their_own",
            inheritance::buildruns,
        ),
        env.trial(
            "buildruns_with_a_bad_ttl_are_rejected",
            inheritance::bad_buildrun,
        ),
        env.trial(
            "at_build_deletion_makes_runs_owned_by_their_build",
            inheritance::at_build_deletion,
        ),
        env.trial(
            "openshift_builds_inherit_buildconfig_default_ttls",
            inheritance::openshift_builds,
        ),
        env.trial("ttl_annotation_stamps_expires_at", ttl_annotation),
        env.trial(
            "bad_annotations_are_rejected_naming_the_annotation",
            bad_annotation,
        ),
        env.trial(
            "objects_without_retention_settings_are_untouched",
            untouched,
        ),
        env.trial("deploy_manifests_pass_server_side_dry_run", deploy_dry_run),
        env.trial(
            "a_webhook_verifying_clients_answers_the_api_server_and_refuses_others_in_tls",
            client_auth::verified,
        ),
        env.trial(
            "a_namespace_past_its_compile_share_is_told_to_wait_and_kubectl_applies_after",
            compile_share::refused_then_applied_by_kubectl,
        ),
    ]
}

/// Trials that stop the webhook: run after all others, one at a time.
pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "with_the_webhook_stopped_unrelated_pods_and_configmaps_create",
        webhook_down,
    )]
}

fn build_yaml(name: &str, retention: &str) -> String {
    format!(
        "apiVersion: shipwright.io/v1beta1\nkind: Build\nmetadata:\n  name: {name}\nspec:\n  \
         source: {{type: Git, git: {{url: https://github.com/shipwright-io/sample-go}}}}\n  \
         strategy: {{kind: ClusterBuildStrategy, name: buildkit}}\n  \
         output: {{image: registry.example/{name}:latest}}\n  retention: {retention}\n"
    )
}

/// `kubectl apply` of `yaml` (plus `extra` flags): whether it succeeded, and all it printed.
fn apply(ns: &TestNamespace, yaml: &str, extra: &[&str]) -> Result<(bool, String)> {
    kube_retention_e2e::outcome_with_input(
        ns.kubectl().args(["apply", "-f", "-"]).args(extra),
        yaml,
    )
}

fn expect_denied(ns: &TestNamespace, yaml: &str, extra: &[&str], needles: &[&str]) -> Result<()> {
    let (ok, text) = apply(ns, yaml, extra)?;
    ensure!(!ok, "apply must fail, printed: {text}");
    for needle in needles {
        ensure!(text.contains(needle), "{needle:?} missing from: {text}");
    }
    Ok(())
}

async fn non_go_duration(ns: TestNamespace) -> Result<()> {
    let yaml = build_yaml("one-day", "{ttlAfterFailed: 1d}");
    expect_denied(
        &ns,
        &yaml,
        &[],
        &[
            "spec.retention.ttlAfterFailed",
            "\"1d\"",
            "is not a duration",
        ],
    )?;
    ensure!(
        ns.dynamic(&shipwright("Build"))
            .get_opt("one-day")
            .await?
            .is_none(),
        "nothing created"
    );
    Ok(())
}

async fn limit_above_100(ns: TestNamespace) -> Result<()> {
    let yaml = build_yaml("too-many", "{succeededLimit: 101}");
    expect_denied(
        &ns,
        &yaml,
        &[],
        &["spec.retention.succeededLimit", "101", "100"],
    )
}

async fn two_errors(ns: TestNamespace) -> Result<()> {
    let yaml = build_yaml("two", "{ttlAfterSucceeded: 2 weeks, failedLimit: 500}");
    expect_denied(
        &ns,
        &yaml,
        &[],
        &[
            "spec.retention.ttlAfterSucceeded: \"2 weeks\"",
            "spec.retention.failedLimit: 500",
        ],
    )
}

async fn valid_settings(ns: TestNamespace) -> Result<()> {
    for (index, ttl) in ["1.5h", "300ms", "1h30m10s", "0s", "36h"]
        .iter()
        .enumerate()
    {
        let yaml = build_yaml(
            &format!("valid-{index}"),
            &format!(
                "{{ttlAfterFailed: \"{ttl}\", ttlAfterSucceeded: \"{ttl}\", succeededLimit: 100, failedLimit: 1}}"
            ),
        );
        let (ok, text) = apply(&ns, &yaml, &[])?;
        ensure!(ok, "{ttl}: {text}");
    }
    Ok(())
}

async fn dry_run(ns: TestNamespace) -> Result<()> {
    let bad = build_yaml("dry-bad", "{ttlAfterFailed: 1d, succeededLimit: 101}");
    expect_denied(&ns, &bad, &["--dry-run=server"], &["\"1d\"", "101"])?;
    let good = build_yaml("dry-good", "{ttlAfterFailed: 1h, succeededLimit: 100}");
    let (ok, text) = apply(&ns, &good, &["--dry-run=server"])?;
    ensure!(ok && text.contains("(server dry run)"), "{text}");
    ensure!(
        ns.dynamic(&shipwright("Build"))
            .get_opt("dry-good")
            .await?
            .is_none(),
        "dry run created nothing"
    );
    Ok(())
}

async fn ttl_annotation(ns: TestNamespace) -> Result<()> {
    let before = Timestamp::now();
    let (ok, text) = apply(
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: short-lived\n  annotations:\n    retention.dev/ttl: 10m\n",
        &[],
    )?;
    ensure!(ok, "{text}");
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(ns.env.client.clone(), &ns.name);
    let config_map = config_maps.get("short-lived").await?;
    let stamped: Timestamp = config_map
        .annotations()
        .get("retention.dev/expires-at")
        .ok_or_else(|| anyhow::anyhow!("no expires-at on {:?}", config_map.metadata))?
        .parse()?;
    let expected = before + jiff::SignedDuration::from_mins(10);
    let off = stamped.duration_since(expected).abs();
    ensure!(
        off <= jiff::SignedDuration::from_secs(3),
        "expires-at {stamped}, expected about {expected}"
    );
    ensure!(
        config_map
            .labels()
            .get("retention.dev/managed")
            .map(String::as_str)
            == Some("true")
    );
    Ok(())
}

async fn bad_annotation(ns: TestNamespace) -> Result<()> {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: soon\n  annotations:\n    retention.dev/ttl: soon\n";
    expect_denied(
        &ns,
        yaml,
        &[],
        &["metadata.annotations[retention.dev/ttl]", "\"soon\""],
    )
}

async fn untouched(ns: TestNamespace) -> Result<()> {
    let (ok, text) = apply(
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata: {a: b}\n",
        &[],
    )?;
    ensure!(ok, "{text}");
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(ns.env.client.clone(), &ns.name);
    let plain = config_maps.get("plain").await?;
    let annotations: Vec<&String> = plain.annotations().keys().collect();
    ensure!(
        annotations == ["kubectl.kubernetes.io/last-applied-configuration"],
        "{annotations:?}"
    );
    ensure!(plain.labels().is_empty(), "{:?}", plain.labels());
    Ok(())
}

async fn deploy_dry_run(ns: TestNamespace) -> Result<()> {
    let output = ns
        .env
        .kubectl()
        .args(["apply", "--dry-run=server", "-k"])
        .arg(ns.env.cluster.layout.repo_root.join("deploy"))
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "{text}");
    for expected in [
        "deployment.apps/kube-retention-webhook",
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ] {
        ensure!(text.contains(expected), "{expected} missing from: {text}");
    }
    Ok(())
}

async fn webhook_down(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let webhook = kube_retention_e2e::process::tracked(
        &cluster.layout.state_dir,
        &[kube_retention_e2e::components::WEBHOOK],
    );
    let webhook = webhook
        .first()
        .ok_or_else(|| anyhow::anyhow!("no webhook pid"))?;
    ensure!(
        webhook.stop(Duration::from_secs(5))?,
        "the webhook was running"
    );
    let outcome = async {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: unrelated\nspec:\n  containers: [{name: c, image: busybox}]\n";
        let (ok, text) = apply(&ns, pod, &[])?;
        ensure!(ok, "an unrelated Pod must create while the webhook is down: {text}");
        let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unrelated\n";
        let (ok, text) = apply(&ns, config_map, &[])?;
        ensure!(ok, "an unrelated ConfigMap must create while the webhook is down: {text}");
        // Annotated Pods too (failurePolicy Ignore), just without a stamp.
        let annotated = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: annotated\n  annotations: {retention.dev/ttl: 1h}\n";
        let (ok, text) = apply(&ns, annotated, &[])?;
        ensure!(ok, "{text}");
        // Shipwright kinds wait for validation (failurePolicy Fail).
        let (ok, text) = apply(&ns, &build_yaml("while-down", "{ttlAfterFailed: 1h}"), &[])?;
        ensure!(!ok && text.contains("failed calling webhook"), "{text}");
        Ok::<(), anyhow::Error>(())
    }
    .await;
    kube_retention_e2e::components::start_webhook(cluster)?;
    kube_retention_e2e::components::wait_for_admission(cluster, Duration::from_secs(30))?;
    outcome
}
