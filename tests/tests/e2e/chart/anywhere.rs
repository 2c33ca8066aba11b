//! The chart outside its home: installed in a namespace not named kube-retention (the webhook
//! told the controller's service account there, every reference pointing there, namespace names
//! that YAML would read as booleans kept strings), values it does not know refused by its
//! schema, and the knobs clusters need (a single replica without a disruption budget that would
//! block every drain, the webhook's port and host network, a priority class, affinity and extra
//! flags) rendered where they belong and accepted by the API server.

use anyhow::{Result, ensure};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use super::{apply_dry_run, args_of, container_of, objects, pod_of, refuses, render, render_in};
use crate::support::{Env, TestNamespace};

pub(super) fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "the_helm_chart_installed_in_another_namespace_points_everything_there",
            another_namespace,
        ),
        env.trial(
            "the_helm_chart_refuses_values_its_schema_does_not_know",
            unknown_values,
        ),
        env.trial(
            "the_helm_chart_renders_one_replica_without_a_disruption_budget_and_the_node_options",
            node_options,
        ),
    ]
}

/// Every value of a `namespace` key anywhere in `value`.
fn namespaces<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                match (key.as_str(), field) {
                    ("namespace", Value::String(namespace)) => found.push(namespace),
                    _ => namespaces(field, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| namespaces(item, found)),
        _ => {}
    }
}

async fn another_namespace(ns: TestNamespace) -> Result<()> {
    // "no" is what YAML 1.1 reads as false: the namespace must stay a string everywhere.
    for namespace in [ns.name.as_str(), "no"] {
        let yaml = render_in(&ns, namespace, &[])?;
        let rendered = objects(&yaml)?;
        let controller = format!(
            "--controller-user=system:serviceaccount:{namespace}:kube-retention-controller"
        );
        let pod = pod_of(&rendered, namespace, "kube-retention-webhook")?;
        let args = args_of(container_of(pod, "webhook")?)?;
        ensure!(
            args.contains(&controller.as_str()),
            "the webhook is told the controller's service account in {namespace}: {args:?}"
        );
        let mut excluding = 0;
        for (key, object) in &rendered {
            // The controller reads the API server's EndpointSlices through a Role in `default`:
            // that object lives there; what it grants still names the release's namespace.
            let mut scanned = object.clone();
            if scanned["metadata"]["namespace"] == "default" {
                scanned["metadata"]
                    .as_object_mut()
                    .map(|metadata| metadata.remove("namespace"));
            }
            let mut found = Vec::new();
            namespaces(&scanned, &mut found);
            ensure!(
                found.iter().all(|found| *found == namespace),
                "{key} points at {found:?}, not only at {namespace}"
            );
            let Some(hooks) = object["webhooks"].as_array() else {
                continue;
            };
            // The policies' hook sees every namespace: only the others leave some out.
            for hook in hooks
                .iter()
                .filter(|hook| hook.get("namespaceSelector").is_some())
            {
                excluding += 1;
                let excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"].clone();
                ensure!(
                    excluded == json!(["kube-system", namespace]),
                    "{key}'s hook {} leaves out kube-system and {namespace}, as strings: {excluded}",
                    hook["name"]
                );
            }
        }
        ensure!(
            excluding >= 3,
            "the hooks that leave namespaces out: {excluding}"
        );
        let binding = rendered
            .get("ValidatingAdmissionPolicyBinding /kube-retention-writers")
            .ok_or_else(|| anyhow::anyhow!("no writer policy binding"))?;
        let excluded = &binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            [0]["values"];
        ensure!(
            *excluded == json!(["kube-system", namespace]),
            "the writer policy's binding leaves out kube-system and {namespace}, as strings: \
             {excluded}"
        );
    }
    let applied = apply_dry_run(&ns, &render_in(&ns, &ns.name, &[])?)?;
    ensure!(
        applied.contains("deployment.apps/kube-retention-webhook created (server dry run)"),
        "kubectl apply --dry-run=server in {}: {applied}",
        ns.name
    );
    Ok(())
}

async fn unknown_values(ns: TestNamespace) -> Result<()> {
    for (values, expected) in [
        ("controller.replica=3", "'replica' not allowed"),
        ("webhook.timeoutSeconds=60", "/webhook/timeoutSeconds"),
        (
            "webhook.failurePolicy.runs=fail",
            "/webhook/failurePolicy/runs",
        ),
        (
            "controller.circuitBreaker.window=ten minutes",
            "/controller/circuitBreaker/window",
        ),
    ] {
        refuses(&ns, values, expected)?;
    }
    Ok(())
}

async fn node_options(ns: TestNamespace) -> Result<()> {
    let values = [
        "--set",
        "controller.replicas=1,webhook.replicas=1,webhook.port=10250,webhook.hostNetwork=true",
        "--set",
        "priorityClassName=system-cluster-critical,webhook.excludedNamespaces=null",
        "--set",
        "webhook.extraArgs={--namespace-compile-share=0.1}",
        "--set-json",
        r#"webhook.extraEnv=[{"name":"RUST_LOG","value":"debug"}]"#,
        "--set-json",
        r#"webhook.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]}]}}}"#,
    ];
    let yaml = render(&ns, &values)?;
    let rendered = objects(&yaml)?;
    let budgets: Vec<&String> = rendered
        .keys()
        .filter(|key| key.starts_with("PodDisruptionBudget "))
        .collect();
    ensure!(
        budgets.is_empty(),
        "one replica each, no disruption budget to block a drain: {budgets:?}"
    );
    let defaults = objects(&render(&ns, &[])?)?;
    ensure!(
        defaults
            .keys()
            .filter(|key| key.starts_with("PodDisruptionBudget "))
            .count()
            == 2,
        "two replicas each by default, a budget each"
    );
    let webhook = pod_of(&rendered, "kube-retention", "kube-retention-webhook")?;
    ensure!(
        webhook["hostNetwork"] == true
            && webhook["dnsPolicy"] == "ClusterFirstWithHostNet"
            && webhook["priorityClassName"] == "system-cluster-critical"
            && webhook["affinity"]["nodeAffinity"].is_object(),
        "the webhook's pod: {webhook}"
    );
    ensure!(
        pod_of(&rendered, "kube-retention", "kube-retention-controller")?["priorityClassName"]
            == "system-cluster-critical",
        "the controller's pod has the priority class"
    );
    let container = container_of(webhook, "webhook")?;
    let args = args_of(container)?;
    for flag in ["--listen=0.0.0.0:10250", "--namespace-compile-share=0.1"] {
        ensure!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    ensure!(
        container["ports"][0] == json!({"name": "https", "containerPort": 10250})
            && container["env"] == json!([{"name": "RUST_LOG", "value": "debug"}]),
        "the webhook container: {container}"
    );
    let applied = apply_dry_run(&ns, &yaml)?;
    ensure!(
        applied.contains("deployment.apps/kube-retention-webhook created (server dry run)"),
        "kubectl apply --dry-run=server: {applied}"
    );
    Ok(())
}
