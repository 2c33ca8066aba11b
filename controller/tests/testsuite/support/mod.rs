//! Fixtures shared by the state tests.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part; fixtures unwrap

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_cleaners::book::{Book, CleanerKey};
use kube_retention_common::api::PolicyRules;
use kube_retention_common::cleaner::Cleaner;
use kube_retention_common::policies::Rules;
use kube_retention_common::{KindId, Registry};
use kube_retention_state::{Action, Approval, LoadedPolicy, Reason, Stamping, State};
use serde_json::{Value, json};

pub const BUILD: &str = "Build.shipwright.io";
pub const BUILDRUN: &str = "BuildRun.shipwright.io";
pub const JOB: &str = "Job.batch";

/// The built-in kind called `name`.
pub fn kind(name: &str) -> KindId {
    Registry::builtin().named(name).unwrap()
}

pub fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

pub fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// A Job in `namespace` that succeeded on New Year's Day, a second after it was created.
pub fn succeeded_job(namespace: &str, name: &str) -> DynamicObject {
    object(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    }))
}

pub fn buildrun(
    name: &str,
    uid: &str,
    rv: &str,
    created: &str,
    status: Option<(&str, &str)>,
    extra: Value,
) -> DynamicObject {
    let mut value = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
                     "creationTimestamp": created, "labels": {"build.shipwright.io/name": "app"}},
        "spec": {"build": {"name": "app"}, "retention": {"ttlAfterSucceeded": "3s", "ttlAfterFailed": "1m"}},
    });
    if let Some((succeeded, completion)) = status {
        value["status"] = json!({"completionTime": completion,
            "conditions": [{"type": "Succeeded", "status": succeeded, "lastTransitionTime": completion}]});
    }
    merge(&mut value, extra);
    object(value)
}

pub fn merge(target: &mut Value, patch: Value) {
    if let (Value::Object(target), Value::Object(patch)) = (target, patch) {
        for (key, value) in patch {
            match target.get_mut(&key) {
                Some(existing) if existing.is_object() && value.is_object() => {
                    merge(existing, value)
                }
                _ => {
                    target.insert(key, value);
                }
            }
        }
    }
}

/// A policy of `spec` as the controller loads it: valid (the test fails otherwise), generation 1.
pub fn loaded_policy(spec: Value) -> LoadedPolicy {
    let spec: PolicyRules = serde_json::from_value(spec).unwrap();
    let (rules, errors) = Rules::read(&spec, None);
    assert_eq!(errors, []);
    LoadedPolicy {
        rules: std::sync::Arc::new(rules),
        errors,
        generation: Some(1),
        approval: Approval::default(),
    }
}

/// The leading state as the controller runs by default: it writes no stamps of its own.
pub fn leader() -> State {
    leading(State::new(Registry::builtin().clone()))
}

/// The leading state with `--stamp=finished`: a finished object's deadline stamped on it.
pub fn stamping_leader() -> State {
    leading(State::new(Registry::builtin().clone()).with_stamping(Stamping::Finished))
}

fn leading(mut state: State) -> State {
    assert_eq!(state.set_leader(true, at("2026-01-01T00:00:00Z")), []);
    state
}

pub fn deletes(actions: &[Action]) -> Vec<(String, Reason)> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Delete { key, reason, .. } => Some((key.name.to_string(), *reason)),
            _ => None,
        })
        .collect()
}

/// The Cleaner `c` in `namespace`.
pub fn cleaner_key(namespace: &str) -> CleanerKey {
    CleanerKey {
        namespace: namespace.into(),
        name: "c".into(),
    }
}

/// A book with `cleaners` listed and their ConfigMaps (none) watched and listed.
pub fn cleaners_book(cleaners: &[Cleaner]) -> Book {
    let mut book = Book::default();
    book.relist_started();
    for cleaner in cleaners {
        book.applied(cleaner);
    }
    book.relist_done();
    let kind = GroupVersionKind::gvk("", "v1", "ConfigMap");
    book.resolved(
        &kind,
        Ok(ApiResource::from_gvk_with_plural(&kind, "configmaps")),
    );
    for (scope, resource, how) in book.plan_watches().unwrap() {
        book.watch_started(&scope, resource, &how);
        book.objects_listed(&scope);
    }
    book
}

/// How the controller starts its CEL evaluator process: the built binary's hidden subcommand.
pub fn evaluator_program() -> kube_retention_evaluator::Program {
    kube_retention_evaluator::Program {
        path: env!("CARGO_BIN_EXE_kube-retention-controller").into(),
        args: vec![kube_retention_controller::EVALUATE.into()],
    }
}

/// A sandbox on that process, started when first needed, with the default bounds.
pub fn sandbox() -> kube_retention_evaluator::Sandbox {
    kube_retention_evaluator::Sandbox::new(
        evaluator_program(),
        kube_retention_evaluator::Limits::default(),
        kube_retention_evaluator::SandboxMetrics::default(),
    )
}

/// The evaluator's process as the controller starts it: [`evaluator_program`], default bounds.
pub fn evaluator_process() -> (
    kube_retention_evaluator::Program,
    kube_retention_evaluator::Limits,
) {
    (
        evaluator_program(),
        kube_retention_evaluator::Limits::default(),
    )
}
