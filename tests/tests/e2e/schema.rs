//! The CRDs' schema on its own: with kube-retention's webhook configurations removed (the
//! webhook unregistered, or bypassed by a restore from a backup), the API server still refuses
//! each invalid policy and Cleaner the schema can judge, naming the field and the rule, and
//! admits valid ones. CEL expressions stay the webhook's (the controller reports them in the
//! status). Disruptive: the configurations are deleted for the test, then created again.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Resource};
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

const CONFIGURATION: &str = "kube-retention";

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "with_the_webhook_configurations_removed_the_api_server_refuses_invalid_policies_and_cleaners",
        refused_without_the_webhook,
    )]
}

/// A spec the schema refuses, and what the API server must say of it.
struct Case {
    kind: &'static str,
    spec: &'static str,
    said: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [], ttl: 1h}",
        said: &["spec.resources", "should have at least 1 items"],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: a/b/c, kind: Pipeline Run}], ttl: 1h}",
        said: &[
            "spec.resources[0].apiVersion: Invalid value: \"a/b/c\": is not GROUP/VERSION",
            "spec.resources[0].kind: Invalid value: \"Pipeline Run\": is not a kind name",
        ],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], ttl: 1d, ttlAfterFailed: -1h, \
               notifyBefore: soon}",
        said: &[
            "spec.ttl: Invalid value: \"1d\": is not a duration",
            "spec.ttlAfterFailed: Invalid value: \"-1h\": is negative",
            "spec.notifyBefore: Invalid value: \"soon\": is not a duration",
        ],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], succeededLimit: 101, \
               failedLimit: 0, safety: {maxImmediateDeletions: -1}}",
        said: &[
            "spec.succeededLimit: Invalid value: 101",
            "should be less than or equal to 100",
            "spec.failedLimit: Invalid value: 0",
            "should be greater than or equal to 1",
            "spec.safety.maxImmediateDeletions: Invalid value: -1",
        ],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], ttl: 1h, groupBy: not a key, \
               sink: ftp://archive.example, \
               selector: {matchLabels: {bad key: x}, matchExpressions: [\
               {key: app, operator: In}, {key: ci, operator: Exists, values: [x]}]}}",
        said: &[
            "spec.groupBy: Invalid value: \"not a key\": is not a label key",
            "spec.sink: Invalid value: \"ftp://archive.example\": is not an http(s) URL",
            "spec.selector.matchLabels: Invalid value: ",
            "is not a label key",
            "spec.selector.matchExpressions[0].values: Invalid value: ",
            "must not be empty for In and NotIn",
            "spec.selector.matchExpressions[1].values: Invalid value: ",
            "must be empty for Exists and DoesNotExist",
        ],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], ttl: 1h, \
               selector: {matchExpressions: [{key: tier, operator: Near, values: [a]}]}}",
        said: &["spec.selector.matchExpressions[0].operator: Unsupported value: \"Near\""],
    },
    Case {
        kind: "RetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], archiveBeforeDelete: true}",
        said: &[
            "would delete nothing",
            "spec.archiveBeforeDelete: Invalid value: ",
            "needs spec.sink",
        ],
    },
    Case {
        kind: "ClusterRetentionPolicy",
        spec: "{resources: [{apiVersion: batch/v1, kind: Job}], ttlAfterSucceeded: 1w}",
        said: &["spec.ttlAfterSucceeded: Invalid value: \"1w\": is not a duration"],
    },
    Case {
        kind: "Cleaner",
        spec: "{ttl: 1d, retry: {period: soon}, cloudEventSink: cleanup-sink, \
               targets: [{name: 1st, reference: {version: v1, kind: ConfigMap}}, \
               {name: time, reference: {version: v1, kind: ConfigMap}}, \
               {name: both, reference: {version: v1, kind: ConfigMap, name: a, matchLabels: {app: a}}}]}",
        said: &[
            "spec.ttl: Invalid value: \"1d\": is not a duration",
            "spec.retry.period: Invalid value: \"soon\": is not a duration",
            "spec.cloudEventSink: Invalid value: \"cleanup-sink\": is not an http(s) URL",
            "spec.targets[0].name: Invalid value: \"1st\": is not a CEL identifier",
            "spec.targets[1].name: Invalid value: \"time\": is not a CEL identifier",
            "spec.targets[2].reference: Invalid value: ",
            "has both name and matchLabels",
        ],
    },
    Case {
        kind: "Cleaner",
        spec: "{targets: [{name: a, reference: {version: v1, kind: ConfigMap}}, \
               {name: a, reference: {version: v1, kind: Secret}}]}",
        said: &["spec.targets[1]: Duplicate value: {\"name\":\"a\"}"],
    },
];

/// The configuration as it can be created again: no identity of the deleted one.
pub(crate) fn anew<K: Resource>(mut object: K) -> K {
    let meta = object.meta_mut();
    *meta = ObjectMeta {
        name: meta.name.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..ObjectMeta::default()
    };
    object
}

async fn refused_without_the_webhook(ns: TestNamespace) -> Result<()> {
    let client = ns.env.client.clone();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client);
    let saved_validating = validating.get(CONFIGURATION).await?;
    let saved_mutating = mutating.get(CONFIGURATION).await?;
    validating
        .delete(CONFIGURATION, &DeleteParams::default())
        .await?;
    mutating
        .delete(CONFIGURATION, &DeleteParams::default())
        .await?;
    let outcome = judged_by_the_schema(&ns);
    let created = PostParams::default();
    validating
        .create(&created, &anew(saved_validating))
        .await
        .context("registering the validating webhooks again")?;
    mutating
        .create(&created, &anew(saved_mutating))
        .await
        .context("registering the mutating webhooks again")?;
    kube_retention_e2e::components::wait_for_admission(&ns.env.cluster, Duration::from_secs(30))?;
    outcome
}

fn judged_by_the_schema(ns: &TestNamespace) -> Result<()> {
    let yaml = |kind: &str, name: &str, spec: &str| {
        let namespace = if kind == "ClusterRetentionPolicy" {
            String::new()
        } else {
            format!(", namespace: {}", ns.name)
        };
        format!(
            "apiVersion: retention.dev/v1alpha1\nkind: {kind}\n\
             metadata: {{name: {name}{namespace}}}\nspec: {spec}\n"
        )
    };
    for (index, case) in CASES.iter().enumerate() {
        let name = format!("{}-invalid-{index}", ns.name);
        let (admitted, said) = kube_retention_e2e::outcome_with_input(
            ns.kubectl().args(["create", "-f", "-"]),
            &yaml(case.kind, &name, case.spec),
        )?;
        ensure!(
            !admitted,
            "case {index}, admitted without the webhook: {said}"
        );
        for expected in case.said {
            let expected = crate::server::cel_rule_denial(&ns.env, expected);
            let expected = crate::server::duplicate_denial(&ns.env, &expected);
            ensure!(
                said.contains(&expected),
                "case {index}: {expected:?} missing from: {said}"
            );
        }
    }
    // Valid ones are admitted: the refusals above are the schema's rules, nothing else.
    for (kind, spec) in [
        (
            "RetentionPolicy",
            "{resources: [{apiVersion: batch/v1, kind: Job}], ttl: 1h30m, ttlAfterFailed: -0s, \
             groupBy: tekton.dev/pipeline, sink: 'http://archive.example', archiveBeforeDelete: true, \
             selector: {matchExpressions: [{key: ci, operator: Exists}]}}",
        ),
        (
            "Cleaner",
            "{ttl: 1h, retry: {period: .5h}, targets: [{name: previews, \
             reference: {version: v1, kind: ConfigMap, matchLabels: {app: preview}}}]}",
        ),
    ] {
        let name = format!("{}-valid", ns.name);
        kube_retention_e2e::run_with_input(
            ns.kubectl().args(["create", "-f", "-"]),
            &yaml(kind, &name, spec),
        )
        .with_context(|| format!("a valid {kind} without the webhook"))?;
    }
    Ok(())
}
