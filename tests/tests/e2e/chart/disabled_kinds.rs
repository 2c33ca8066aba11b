//! The chart's `controller.disabledKinds`, which shapes the admission registrations as well as
//! the flags: a disabled built-in kind loses its resource in the Shipwright and OpenShift rules
//! and gets a matchCondition keeping it from the `*` rule, the controller and the webhook get
//! `--disable-kind`, the writer policy's binding excludes it, the API server accepts the render
//! and, once it is registered, sends the
//! webhook neither disabled kind while still sending their neighbours, and the controller loses
//! their grants; an unknown kind fails the render, naming it and the accepted ones. The everyday
//! kinds' grants, one by one (`controller.objectKinds`), are here too.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use super::{apply_dry_run, objects, render};
use crate::cleaners::helm;
use crate::support::{Env, TestNamespace};
use crate::workloads::eventually;

pub(super) fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "the_helm_chart_leaves_disabled_kinds_out_of_the_admission_registrations",
            rendered,
        ),
        env.trial(
            "the_api_server_keeps_disabled_kinds_from_the_charts_registrations_only",
            registered,
        ),
        env.trial(
            "the_helm_chart_refuses_an_unknown_disabled_kind_naming_it",
            unknown,
        ),
        env.trial(
            "the_helm_chart_withholds_the_delete_grant_of_each_object_kind_set_false",
            object_kinds,
        ),
    ]
}

/// The everyday kinds' ClusterRole, and `controller.objectKinds` with every kind `false`.
const OBJECTS: &str = "ClusterRole /kube-retention-controller-objects";
const OBJECT_KINDS: [&str; 10] = [
    "configmaps",
    "services",
    "serviceaccounts",
    "persistentvolumeclaims",
    "deployments\\.apps",
    "statefulsets\\.apps",
    "daemonsets\\.apps",
    "replicasets\\.apps",
    "cronjobs\\.batch",
    "ingresses\\.networking\\.k8s\\.io",
];

/// `controller.objectKinds`: a kind set `false` loses its resource from the ClusterRole and
/// nothing else moves; every kind `false` leaves the ClusterRole out; the API server accepts
/// the render.
async fn object_kinds(ns: TestNamespace) -> Result<()> {
    let defaults = objects(&render(&ns, &[])?)?;
    let withheld_values = [
        "--set",
        "controller.objectKinds.deployments\\.apps=false,controller.objectKinds.configmaps=false",
    ];
    let yaml = render(&ns, &withheld_values)?;
    let withheld = objects(&yaml)?;
    let mut expected = defaults.clone();
    for rule in expected
        .get_mut(OBJECTS)
        .and_then(|role| role["rules"].as_array_mut())
        .context(OBJECTS)?
    {
        if let Some(resources) = rule["resources"].as_array_mut() {
            resources.retain(|resource| resource != "deployments" && resource != "configmaps");
        }
    }
    ensure!(
        withheld == expected,
        "deployments.apps and configmaps withheld: {:?}",
        withheld.get(OBJECTS)
    );
    let none: Vec<String> = OBJECT_KINDS
        .iter()
        .map(|kind| format!("controller.objectKinds.{kind}=false"))
        .collect();
    let none = objects(&render(&ns, &["--set", &none.join(",")])?)?;
    let mut expected = defaults;
    expected.remove(OBJECTS);
    ensure!(
        none == expected,
        "every object kind withheld: {:?}",
        none.get(OBJECTS)
    );
    let applied = apply_dry_run(&ns, &yaml)?;
    ensure!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/kube-retention-controller-objects"),
        "{applied}"
    );
    Ok(())
}

const DISABLED: [&str; 2] = [
    "--set",
    "controller.disabledKinds={Job.batch,BuildRun.shipwright.io}",
];
const NO_JOBS: &str = "!(request.resource.group == 'batch' && request.resource.resource == 'jobs')";
const REGISTRATIONS: [&str; 2] = [
    "ValidatingWebhookConfiguration /kube-retention",
    "MutatingWebhookConfiguration /kube-retention",
];

async fn rendered(ns: TestNamespace) -> Result<()> {
    let defaults = objects(&render(&ns, &[])?)?;
    let yaml = render(&ns, &DISABLED)?;
    let disabled = objects(&yaml)?;
    for key in REGISTRATIONS {
        // The default registration, but BuildRuns dropped and Jobs excluded: nothing else moves.
        let mut expected = defaults.get(key).context(key)?.clone();
        for hook in expected["webhooks"].as_array_mut().context(key)? {
            let name = hook["name"].as_str().unwrap_or_default().to_owned();
            if name.starts_with("runs.") {
                ensure!(
                    hook["rules"][0]["apiGroups"] == json!(["shipwright.io"]),
                    "{name}: {hook}"
                );
                hook["rules"][0]["resources"] = json!(["builds"]);
            } else if name.starts_with("annotated.") {
                let conditions = hook["matchConditions"]
                    .as_array_mut()
                    .context("conditions")?;
                let condition = json!({"name": "not-disabled-Job.batch", "expression": NO_JOBS});
                conditions.insert(1, condition);
            }
        }
        let actual = disabled.get(key).context(key)?;
        ensure!(
            *actual == expected,
            "{key} with Job.batch and BuildRun.shipwright.io disabled:\nexpected: {expected}\n\
             rendered: {actual}"
        );
    }
    // The writer policy's binding leaves Jobs out too (BuildRuns never reach it).
    let key = "ValidatingAdmissionPolicyBinding /kube-retention-writers";
    let mut expected = defaults.get(key).context(key)?.clone();
    expected["spec"]["matchResources"]["excludeResourceRules"] = json!([{
        "apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"],
        "operations": ["*"], "scope": "*"}]);
    ensure!(
        disabled.get(key) == Some(&expected),
        "{key} with Job.batch and BuildRun.shipwright.io disabled:\nexpected: {expected}\n\
         rendered: {:?}",
        disabled.get(key)
    );
    for (deployment, container) in [("controller", "controller"), ("webhook", "webhook")] {
        let key = format!("Deployment kube-retention/kube-retention-{deployment}");
        let flags = disable_kind_flags(disabled.get(&key).context(key.clone())?, container)?;
        ensure!(
            flags
                == [
                    "--disable-kind=BuildRun.shipwright.io",
                    "--disable-kind=Job.batch"
                ],
            "{key}: the {container} container's --disable-kind flags are {flags:?}"
        );
    }
    // Their grants go too: the default ClusterRole but the Job and BuildRun rules.
    let key = "ClusterRole /kube-retention-controller-builtin";
    let mut expected = defaults.get(key).context(key)?.clone();
    expected["rules"]
        .as_array_mut()
        .context(key)?
        .retain(|rule| {
            rule["resources"] != json!(["jobs"]) && rule["resources"] != json!(["buildruns"])
        });
    ensure!(
        disabled.get(key) == Some(&expected),
        "{key} with Job.batch and BuildRun.shipwright.io disabled:\nexpected: {expected}\n\
         rendered: {:?}",
        disabled.get(key)
    );
    let applied = apply_dry_run(&ns, &yaml)?;
    ensure!(
        applied
            .lines()
            .all(|line| line.ends_with("(server dry run)"))
            && applied.contains("validatingwebhookconfiguration.admissionregistration.k8s.io/")
            && applied.contains("mutatingwebhookconfiguration.admissionregistration.k8s.io/"),
        "kubectl apply --dry-run=server of the render with disabled kinds: {applied}"
    );
    Ok(())
}

fn disable_kind_flags(deployment: &Value, container: &str) -> Result<Vec<String>> {
    let containers = deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .context("containers")?;
    let found = containers
        .iter()
        .find(|found| found["name"] == container)
        .with_context(|| format!("no {container} container"))?;
    Ok(found["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(Value::as_str)
        .filter(|arg| arg.starts_with("--disable-kind"))
        .map(str::to_owned)
        .collect())
}

/// The rendered runs and annotated validating hooks registered for real, but called at an
/// address where nothing listens (failurePolicy Fail), for namespaced objects of this namespace
/// only (other tests run meanwhile): what the API server refuses is what it would have sent to
/// the webhook. Server-side dry runs, so nothing is created.
async fn registered(ns: TestNamespace) -> Result<()> {
    let configuration = format!("kube-retention-e2e-{}", ns.name);
    let mut registration = objects(&render(&ns, &DISABLED)?)?
        .remove(REGISTRATIONS[0])
        .context(REGISTRATIONS[0])?;
    registration["metadata"] = json!({"name": configuration});
    let webhooks = registration["webhooks"]
        .as_array_mut()
        .context("webhooks")?;
    webhooks.retain(|hook| hook["name"] != "policies.validate.retention.dev");
    let mut hooks = BTreeMap::new();
    for hook in webhooks {
        let name = hook["name"].as_str().unwrap_or_default().replace(
            ".validate.retention.dev",
            ".disabled-kinds.e2e.retention.dev",
        );
        hook["name"] = json!(name);
        hook["clientConfig"] = json!({"url": "https://127.0.0.1:1/validate"});
        hook["failurePolicy"] = json!("Fail");
        hook["namespaceSelector"] =
            json!({"matchLabels": {"kubernetes.io/metadata.name": ns.name}});
        for rule in hook["rules"].as_array_mut().context("rules")? {
            rule["scope"] = json!("Namespaced");
        }
        hooks.insert(name.split('.').next().unwrap_or_default().to_owned(), name);
    }
    kube_retention_e2e::run_with_input(
        ns.env.kubectl().args(["apply", "-f", "-"]),
        &registration.to_string(),
    )?;
    let outcome = async {
        let annotated = json!({"retention.dev/ttl-after-finished": "1h"});
        let pod = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]});
        let build = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
            "metadata": {"name": "parent"},
            "spec": {"source": {"type": "Git", "git": {"url": "https://example.com/x"}},
                "strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
                "output": {"image": "registry.example/x:latest"}}});
        let cron_job = json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "annotations": annotated},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": pod}}}}});
        // Sent, so refused: the registration is in force, and only the disabled kinds go.
        for (object, hook) in [(&build, &hooks["runs"]), (&cron_job, &hooks["annotated"])] {
            let refused = format!("failed calling webhook \"{hook}\"");
            eventually(Duration::from_secs(30), &refused, || async {
                let (ok, said) = dry_run_create(&ns, object)?;
                Ok(!ok && said.contains(&refused))
            })
            .await?;
        }
        let build_run = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
            "metadata": {"name": "run"}, "spec": {"build": {"name": "parent"}}});
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "once", "annotations": annotated},
            "spec": {"template": {"spec": pod}}});
        for object in [&build_run, &job] {
            let (ok, said) = dry_run_create(&ns, object)?;
            ensure!(
                ok,
                "{} is disabled, so never sent to the webhook: {said}",
                object["kind"].as_str().unwrap_or_default()
            );
        }
        Ok(())
    }
    .await;
    kube_retention_e2e::run(ns.env.kubectl().args([
        "delete",
        "validatingwebhookconfiguration",
        &configuration,
        "--ignore-not-found",
    ]))?;
    outcome
}

/// `kubectl create --dry-run=server` of `object`: whether it was admitted, and all it printed.
fn dry_run_create(ns: &TestNamespace, object: &Value) -> Result<(bool, String)> {
    kube_retention_e2e::outcome_with_input(
        ns.kubectl().args(["create", "--dry-run=server", "-f", "-"]),
        &object.to_string(),
    )
}

async fn unknown(ns: TestNamespace) -> Result<()> {
    let chart = ns.env.cluster.layout.repo_root.join(super::CHART);
    let refused = kube_retention_e2e::output_with_input(
        helm(&ns.env)
            .args(["template", "x"])
            .args([
                "--set",
                "controller.disabledKinds={Job.batch,Gadget.example.com}",
            ])
            .arg(&chart),
        "",
    )?;
    let said = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        !refused.status.success()
            && said.contains(
                "controller.disabledKinds: \"Gadget.example.com\" is not a built-in kind; use \
                 Build.shipwright.io, BuildRun.shipwright.io, Build.build.openshift.io, \
                 BuildConfig.build.openshift.io, Job.batch, Pod"
            ),
        "an unknown disabled kind must fail the render, naming it and the accepted ones: {said}"
    );
    // Names are matched in any case, as the binaries match them, and flagged as the table
    // spells them.
    let flags = disable_kind_flags(
        objects(&render(&ns, &["--set", "controller.disabledKinds={pod}"])?)?
            .get("Deployment kube-retention/kube-retention-controller")
            .context("the controller")?,
        "controller",
    )?;
    ensure!(
        flags == ["--disable-kind=Pod"],
        "disabling `pod`: {flags:?}"
    );
    Ok(())
}
