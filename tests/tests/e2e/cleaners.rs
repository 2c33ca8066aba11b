//! Cleaners on the real cluster: a preview environment — a Helm release installed with the real
//! helm, a named ConfigMap and label-selected objects of a kind defined here — kept while its
//! condition is false and cleaned within seconds of a target change, announced to an HTTP sink;
//! a forged Helm release record deleting only what Helm installed for the release;
//! a monotonic time condition acting at its time; a broken condition refused at apply; a
//! condition failing at run time reported, never taken as true; a sink the sink policy refuses
//! never connected to, and an allowed one still announced to; sinks inside the cluster (its
//! service CIDR, a node, the API server) refused as the controller learns them; and a
//! restarted controller evaluating every Cleaner once with one LIST per kind; and a Cleaner
//! reading megabyte ConfigMaps past its namespace's bound, let go of, saying so.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_retention_common::cleaner::Cleaner;
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::kinds::{GROUP, define_kind};
use crate::support::{Env, TestNamespace, object};

mod forged;
mod group;
mod held;
mod restart;
pub mod sink;
mod sink_insides;
mod sink_policy;
mod timing;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "a_preview_environment_is_cleaned_within_seconds_of_its_condition_turning_true",
            group::preview_environment,
        ),
        env.trial(
            "a_forged_helm_release_record_makes_a_cleaner_delete_only_what_helm_installed",
            forged::forged_release,
        ),
        env.trial(
            "a_monotonic_time_condition_cleans_at_its_time_with_an_hour_long_period",
            timing::monotonic,
        ),
        env.trial(
            "a_cleaner_with_a_broken_condition_is_refused_at_apply_naming_it",
            timing::broken_condition,
        ),
        env.trial(
            "a_condition_failing_at_run_time_makes_the_cleaner_not_ready_and_deletes_nothing",
            timing::runtime_error,
        ),
        env.trial(
            "a_cleaner_sink_on_loopback_is_refused_by_the_sink_policy_without_a_connection",
            sink_policy::refused_sink,
        ),
        env.trial(
            "a_cleaner_sink_the_admin_allowed_still_receives_the_cloud_event",
            sink_policy::allowed_sink,
        ),
        env.trial(
            "a_cleaner_whose_targets_outgrow_its_namespace_s_bound_says_so_and_deletes_nothing",
            held::outgrown,
        ),
    ]
}

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "a_restarted_controller_evaluates_every_cleaner_once_with_one_list_per_kind",
            restart::evaluated_once,
        ),
        env.trial(
            "a_cleaner_sink_in_the_service_cidr_a_node_or_the_api_server_is_refused_at_connection",
            sink_insides::refused_inside,
        ),
    ]
}

/// The kind of the label-selected targets, defined by the tests.
pub const REVISION: &str = "Revision";

/// Defines `Revision` and lets the controller read and delete it — but not patch it, so only
/// Cleaners watch it (the retention watches need patch).
pub async fn revisions(env: &Env) -> Result<ApiResource> {
    let resource = define_kind(env, REVISION).await?;
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "e2e-retention-cleaner-revisions",
                     "labels": {"retention.dev/aggregate-to-controller": "true"}},
        "rules": [{"apiGroups": [GROUP], "resources": ["revisions"],
                   "verbs": ["list", "watch", "delete"]}]});
    kube_retention_e2e::run_with_input(
        env.kubectl().args(["apply", "-f", "-"]),
        &role.to_string(),
    )?;
    Ok(resource)
}

/// Creates a Revision labelled `app` in `phase`.
pub async fn revision(
    ns: &TestNamespace,
    resource: &ApiResource,
    name: &str,
    app: &str,
    phase: &str,
) -> Result<()> {
    let api = ns.dynamic(resource);
    let value = json!({"apiVersion": format!("{GROUP}/v1"), "kind": REVISION,
                       "metadata": {"name": name, "labels": {"app": app}}});
    api.create(&PostParams::default(), &object(resource, value)?)
        .await?;
    set_phase(ns, resource, name, phase).await
}

pub async fn set_phase(
    ns: &TestNamespace,
    resource: &ApiResource,
    name: &str,
    phase: &str,
) -> Result<()> {
    let patch = json!({"status": {"phase": phase}});
    ns.dynamic(resource)
        .patch_status(name, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Creates a Cleaner named `name` with `spec`.
pub async fn create_cleaner(ns: &TestNamespace, name: &str, spec: Value) -> Result<String> {
    let cleaner: Cleaner = serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": name}, "spec": spec}))?;
    let api: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let created = api.create(&PostParams::default(), &cleaner).await?;
    Ok(created.metadata.uid.unwrap_or_default())
}

/// A condition of a Cleaner's status.
pub fn condition(cleaner: &Cleaner, kind: &str) -> Option<(String, String, String)> {
    let status = cleaner.status.as_ref()?;
    let found = status
        .conditions
        .iter()
        .find(|condition| condition.type_ == kind)?;
    Some((
        found.status.clone(),
        found.reason.clone(),
        found.message.clone(),
    ))
}

/// The real helm, as the cluster's admin, with its caches in the cluster's state folder.
pub fn helm(env: &Env) -> Command {
    env.cluster.helm()
}

/// Lets the controller remove Helm releases in `ns` with the Role deploy/ ships for it.
pub fn grant_helm(ns: &TestNamespace) -> Result<()> {
    let role = ns
        .env
        .cluster
        .layout
        .repo_root
        .join("deploy/optional/cleaner-helm.yaml");
    kube_retention_e2e::run(ns.kubectl().arg("apply").arg("-f").arg(role))?;
    Ok(())
}

/// Whether `name` of `resource` still exists in `ns`.
pub async fn exists(ns: &TestNamespace, resource: &ApiResource, name: &str) -> Result<bool> {
    Ok(ns.dynamic(resource).get_opt(name).await?.is_some())
}

pub fn config_maps() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
}

pub fn services() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Service"), "services")
}

/// Creates an empty ConfigMap `name`.
pub async fn config_map(ns: &TestNamespace, name: &str) -> Result<()> {
    let value = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let api: Api<DynamicObject> = ns.dynamic(&config_maps());
    api.create(&PostParams::default(), &object(&config_maps(), value)?)
        .await
        .with_context(|| format!("creating ConfigMap {name}"))?;
    Ok(())
}

/// The reasons and messages of the Events on the Cleaner `name`.
pub fn events(ns: &TestNamespace, name: &str) -> Result<Vec<(String, String)>> {
    let listed = kube_retention_e2e::run(ns.kubectl().args([
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name},involvedObject.kind=Cleaner"),
        "-o",
        "json",
    ]))?;
    let listed: Value = serde_json::from_str(&listed)?;
    Ok(listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
            (text("reason"), text("message"))
        })
        .collect())
}

/// Fails with what is left when `check` does not hold.
pub fn expect(check: bool, what: impl FnOnce() -> String) -> Result<()> {
    if !check {
        bail!("{}", what());
    }
    Ok(())
}

pub const POLL: Duration = Duration::from_millis(50);
