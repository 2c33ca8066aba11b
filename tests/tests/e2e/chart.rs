//! The Helm chart (charts/kube-retention), checked with the real helm built from Go modules (as
//! upstream builds it, so it assumes a current Kubernetes without `--kube-version`): it
//! lints, it renders exactly the objects of deploy/ for default values (but the Namespace, which
//! Helm's --create-namespace owns, Helm's own labels, and the hooks of `helm uninstall` and
//! `helm test`, which the as-shipped suite runs), and the API server accepts what it renders in a server-side dry run,
//! monitoring objects included (against the Prometheus operator's real CRDs). What
//! `controller.disabledKinds` does to the render is `chart/disabled_kinds.rs`'s; another
//! namespace, the values schema and the node options are `chart/anywhere.rs`'s; who may reach
//! the webhook (`webhook.clientAuth`, `webhook.networkPolicy`) is `chart/webhook_access.rs`'s.
//! The writer policy (`admissionPolicy.enabled`) is rendered unless turned off, its binding
//! following the namespaces and disabled kinds (`chart/anywhere.rs`, `chart/disabled_kinds.rs`).

mod anywhere;
mod disabled_kinds;
mod webhook_access;

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use libtest_mimic::Trial;
use serde::Deserialize;
use serde_json::Value;

use crate::cleaners::helm;
use crate::support::{Env, TestNamespace};

pub fn tests(env: &Env) -> Vec<Trial> {
    let mut tests = vec![
        env.trial("the_helm_chart_passes_helm_lint", lint),
        env.trial(
            "the_helm_chart_renders_the_objects_of_deploy_for_default_values",
            same_as_deploy,
        ),
        env.trial(
            "the_helm_chart_is_accepted_by_the_api_server_in_a_server_side_dry_run",
            server_dry_run,
        ),
        env.trial(
            "the_helm_chart_leaves_the_writer_policy_out_only_when_told",
            writer_policy_toggle,
        ),
    ];
    tests.extend(anywhere::tests(env));
    tests.extend(disabled_kinds::tests(env));
    tests.extend(webhook_access::tests(env));
    tests
}

const CHART: &str = "charts/kube-retention";
/// Every monitoring object the chart can render.
const MONITORING: &str = "monitoring.prometheusRule.enabled=true,monitoring.podMonitor.enabled=true,monitoring.dashboard.enabled=true";
/// The labels Helm adds to each object; deploy/ has none of them.
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

/// `kubectl apply --dry-run=server` of `yaml`: what the API server says it would create.
fn apply_dry_run(ns: &TestNamespace, yaml: &str) -> Result<String> {
    kube_retention_e2e::run_with_input(
        ns.env
            .kubectl()
            .args(["apply", "--dry-run=server", "-f", "-"]),
        yaml,
    )
}

fn render(ns: &TestNamespace, extra: &[&str]) -> Result<String> {
    render_in(ns, "kube-retention", extra)
}

/// `helm template` of the chart as a release in `namespace`, CRDs included.
fn render_in(ns: &TestNamespace, namespace: &str, extra: &[&str]) -> Result<String> {
    let chart = ns.env.cluster.layout.repo_root.join(CHART);
    kube_retention_e2e::run(
        helm(&ns.env)
            .args(["template", "kube-retention", "--namespace", namespace])
            .arg("--include-crds")
            // Helm's hooks run on Helm's own steps only (`helm uninstall`, `helm test`), which
            // `kubectl apply` has none of; the as-shipped suite runs them.
            .arg("--no-hooks")
            .args(extra)
            .arg(chart),
    )
}

async fn lint(ns: TestNamespace) -> Result<()> {
    let chart = ns.env.cluster.layout.repo_root.join(CHART);
    for values in [
        &["--strict"][..],
        &["--strict", "--set", "certificates.mode=cert-manager"],
        &["--strict", "--set", MONITORING],
    ] {
        let said = kube_retention_e2e::run(helm(&ns.env).arg("lint").args(values).arg(&chart))?;
        ensure!(said.contains("0 chart(s) failed"), "helm lint: {said}");
    }
    refuses(
        &ns,
        "certificates.mode=vault",
        "certificates.mode \"vault\": use self-managed or cert-manager",
    )
}

/// `helm template` with `--set values` fails, saying `expected`.
fn refuses(ns: &TestNamespace, values: &str, expected: &str) -> Result<()> {
    let chart = ns.env.cluster.layout.repo_root.join(CHART);
    let output = kube_retention_e2e::output_with_input(
        helm(&ns.env)
            .args(["template", "x", "--set", values])
            .arg(&chart),
        "",
    )?;
    let said = String::from_utf8_lossy(&output.stderr);
    ensure!(
        !output.status.success() && said.contains(expected),
        "--set {values} must fail the render saying {expected:?}: {said}"
    );
    Ok(())
}

/// The pod template of the Deployment `name` in `namespace` among `rendered`.
fn pod_of<'a>(
    rendered: &'a BTreeMap<String, Value>,
    namespace: &str,
    name: &str,
) -> Result<&'a Value> {
    let deployment = rendered
        .get(&format!("Deployment {namespace}/{name}"))
        .with_context(|| format!("the Deployment {name}"))?;
    Ok(&deployment["spec"]["template"]["spec"])
}

/// The container `name` of `pod`.
fn container_of<'a>(pod: &'a Value, name: &str) -> Result<&'a Value> {
    pod["containers"]
        .as_array()
        .and_then(|containers| containers.iter().find(|c| c["name"] == name))
        .with_context(|| format!("the {name} container"))
}

/// A container's args.
fn args_of(container: &Value) -> Result<Vec<&str>> {
    Ok(container["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(Value::as_str)
        .collect())
}

/// Objects by kind, namespace and name, without Helm's labels.
fn objects(yaml: &str) -> Result<BTreeMap<String, Value>> {
    let mut objects = BTreeMap::new();
    for document in serde_norway::Deserializer::from_str(yaml) {
        let mut object = whole_numbers(Value::deserialize(document)?);
        if object.is_null() {
            continue;
        }
        let metadata = object
            .get_mut("metadata")
            .context("an object without metadata")?;
        if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
            labels.retain(|key, _| !HELM_LABELS.contains(&key.as_str()));
            if labels.is_empty() {
                metadata
                    .as_object_mut()
                    .map(|metadata| metadata.remove("labels"));
            }
        }
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = format!(
            "{} {}/{}",
            text("/kind"),
            text("/metadata/namespace"),
            text("/metadata/name")
        );
        objects.insert(key, object);
    }
    Ok(objects)
}

/// `0.0` and `0` alike: YAML writers differ on how they spell a whole number.
fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(number) => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.abs() < 9e15 => Value::from(float as i64),
            _ => Value::Number(number),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, whole_numbers(value)))
                .collect(),
        ),
        other => other,
    }
}

async fn same_as_deploy(ns: TestNamespace) -> Result<()> {
    let deploy = ns.env.cluster.layout.repo_root.join("deploy");
    let kustomized = kube_retention_e2e::run(ns.env.kubectl().arg("kustomize").arg(deploy))?;
    let mut expected = objects(&kustomized)?;
    ensure!(
        expected.remove("Namespace /kube-retention").is_some(),
        "deploy/ creates the namespace"
    );
    let rendered = objects(&render(&ns, &[])?)?;
    let missing: Vec<&String> = expected
        .keys()
        .filter(|key| !rendered.contains_key(*key))
        .collect();
    let extra: Vec<&String> = rendered
        .keys()
        .filter(|key| !expected.contains_key(*key))
        .collect();
    ensure!(
        missing.is_empty() && extra.is_empty(),
        "only in deploy/: {missing:?}; only in the chart: {extra:?}"
    );
    for (key, object) in &expected {
        let chart = &rendered[key];
        ensure!(
            object == chart,
            "{key} differs:\ndeploy/: {}\nchart:   {}",
            serde_json::to_string(object)?,
            serde_json::to_string(chart)?
        );
    }
    println!(
        "the chart renders the {} objects of deploy/",
        expected.len()
    );
    Ok(())
}

/// The writer policy and its binding are rendered by default and only left out with
/// `admissionPolicy.enabled=false`, which moves nothing else.
async fn writer_policy_toggle(ns: TestNamespace) -> Result<()> {
    let mut expected = objects(&render(&ns, &[])?)?;
    for key in [
        "ValidatingAdmissionPolicy /kube-retention-writers",
        "ValidatingAdmissionPolicyBinding /kube-retention-writers",
    ] {
        ensure!(
            expected.remove(key).is_some(),
            "{key} is not rendered by default"
        );
    }
    let without = objects(&render(&ns, &["--set", "admissionPolicy.enabled=false"])?)?;
    ensure!(
        without == expected,
        "admissionPolicy.enabled=false changed more than the policy: {:?}",
        without.keys().collect::<Vec<_>>()
    );
    Ok(())
}

async fn server_dry_run(ns: TestNamespace) -> Result<()> {
    install_prometheus_operator_crds(&ns)?;
    let extra_rules = r#"controller.extraRules=[{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["list","watch","delete"]}]"#;
    let rendered = render(&ns, &["--set-json", extra_rules, "--set", MONITORING])?;
    let applied = apply_dry_run(&ns, &rendered)?;
    let lines = applied.lines().count();
    ensure!(
        applied
            .lines()
            .all(|line| line.ends_with("(server dry run)"))
            && lines > 20,
        "kubectl apply --dry-run=server: {applied}"
    );
    for monitored in [
        "prometheusrule.monitoring.coreos.com/kube-retention",
        "podmonitor.monitoring.coreos.com/kube-retention",
        "configmap/kube-retention-dashboard",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kube-retention-writers",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/kube-retention-writers",
    ] {
        ensure!(
            applied.contains(monitored),
            "{monitored} was not applied: {applied}"
        );
    }
    let monitoring = ns.env.cluster.layout.repo_root.join("deploy/monitoring");
    let applied = kube_retention_e2e::run(
        ns.env
            .kubectl()
            .args(["apply", "--dry-run=server", "-k"])
            .arg(monitoring),
    )?;
    ensure!(
        applied.contains(
            "prometheusrule.monitoring.coreos.com/kube-retention created (server dry run)"
        ) && applied.contains("configmap/kube-retention-dashboard created (server dry run)"),
        "kubectl apply --dry-run=server -k deploy/monitoring: {applied}"
    );
    Ok(())
}

/// The Prometheus operator's real PrometheusRule and PodMonitor CRDs (vendored in tests/crds), so
/// the API server checks the chart's monitoring objects against their schemas.
fn install_prometheus_operator_crds(ns: &TestNamespace) -> Result<()> {
    let crds = ns
        .env
        .cluster
        .layout
        .repo_root
        .join("tests/crds/prometheus-operator");
    kube_retention_e2e::run(
        ns.env
            .kubectl()
            .args([
                "apply",
                "--server-side",
                "--field-manager=kube-retention-e2e",
                "-f",
            ])
            .arg(crds),
    )?;
    kube_retention_e2e::run(ns.env.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/prometheusrules.monitoring.coreos.com",
        "crd/podmonitors.monitoring.coreos.com",
    ]))?;
    Ok(())
}
