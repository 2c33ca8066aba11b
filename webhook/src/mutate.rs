//! Mutation: what admission can add to an object, returned as the patched object (the caller
//! diffs it into a JSON patch, so a second invocation produces no further patch).
//!
//! - A new BuildRun naming a Build copies the Build's `ttlAfterSucceeded` / `ttlAfterFailed`
//!   into `spec.retention`, field by field, where the BuildRun sets none; with
//!   `atBuildDeletion: true` it becomes owned by the Build. Later edits of the Build leave
//!   existing BuildRuns alone (Shipwright's documented semantics).
//! - A new OpenShift-style Build from a BuildConfig copies the BuildConfig's default TTLs.
//! - Every object with a TTL gets `retention.dev/expires-at` (with `retention.dev/stamped`, which
//!   marks it as kube-retention's) once it can be computed, and the `retention.dev/managed` label
//!   the controller's watches select on. A stamp whose TTL the update removed is taken off.

use jiff::Timestamp;
use kube_retention_common::annotations::{EXPIRES_AT, MANAGED_LABEL, STAMPED};
use kube_retention_common::expiry::format_timestamp;
use kube_retention_common::kind::{BUILD_CONFIG_ANNOTATION, field};
use kube_retention_common::{Expiry, Kind, Policy, StampChange};
use serde_json::{Map, Value, json};

use crate::parents::{ParentKind, Parents};

/// An object after mutation, and warnings for the user.
pub struct Mutated {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// Mutates `object` (already valid) for a CREATE (`creating`) or UPDATE in `namespace`.
pub async fn mutate(
    parents: &dyn Parents,
    object: &Value,
    namespace: Option<&str>,
    creating: bool,
    now: Timestamp,
) -> Mutated {
    let mut mutated = Mutated {
        object: object.clone(),
        warnings: Vec::new(),
    };
    if creating && let Some(namespace) = namespace {
        match Kind::of_object(object) {
            Kind::BuildRun => inherit_from_build(parents, namespace, &mut mutated).await,
            Kind::OpenShiftBuild => {
                inherit_from_build_config(parents, namespace, &mut mutated).await
            }
            _ => {}
        }
    }
    stamp(&mut mutated.object, now);
    mutated
}

/// Sets kube-retention's stamp (and the managed label) where the expiry is computable, and
/// removes a stamp no TTL stands behind any more.
pub fn stamp(object: &mut Value, now: Timestamp) {
    let (policy, _) = Policy::read(object);
    match Expiry::with_policy(&policy, object, now).stamp_change(&policy.annotations) {
        Some(StampChange::Set(at)) => {
            let stamp = format_timestamp(at);
            set_metadata_entry(object, "annotations", EXPIRES_AT, &stamp);
            set_metadata_entry(object, "annotations", STAMPED, &stamp);
        }
        Some(StampChange::Remove(_)) => {
            let annotations = object_at(object, &["metadata", "annotations"]);
            annotations.remove(EXPIRES_AT);
            annotations.remove(STAMPED);
        }
        None => {}
    }
    if policy.has_ttl() || policy.annotations.own_deadline().is_some() {
        set_metadata_entry(object, "labels", MANAGED_LABEL, "true");
    }
}

async fn inherit_from_build(parents: &dyn Parents, namespace: &str, mutated: &mut Mutated) {
    let Some(name) = field(&mutated.object, "spec.build.name").and_then(Value::as_str) else {
        return; // An embedded build spec carries its own retention.
    };
    let name = name.to_owned();
    let Some(build) = lookup(
        parents,
        ParentKind::ShipwrightBuild,
        namespace,
        &name,
        mutated,
    )
    .await
    else {
        return;
    };
    let (policy, _) = Policy::read(&build);
    for (field_name, valid) in [
        (
            "ttlAfterSucceeded",
            policy.runs.ttls.after_succeeded.is_some(),
        ),
        ("ttlAfterFailed", policy.runs.ttls.after_failed.is_some()),
    ] {
        let path = format!("spec.retention.{field_name}");
        let Some(value) = field(&build, &path).filter(|_| valid) else {
            continue;
        };
        if field(&mutated.object, &path).is_none() {
            object_at(&mut mutated.object, &["spec", "retention"])
                .insert(field_name.to_owned(), value.clone());
        }
    }
    if policy.runs.at_build_deletion {
        own_by(&mut mutated.object, &build);
    }
}

async fn inherit_from_build_config(parents: &dyn Parents, namespace: &str, mutated: &mut Mutated) {
    let name = mutated
        .object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(BUILD_CONFIG_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(name) = name else {
        return;
    };
    let Some(config) = lookup(parents, ParentKind::BuildConfig, namespace, &name, mutated).await
    else {
        return;
    };
    let (policy, _) = Policy::read(&config);
    for (from, to, valid) in [
        (
            "defaultSuccessfulBuildTTLSeconds",
            "successfulBuildTTLSeconds",
            policy.runs.ttls.after_succeeded.is_some(),
        ),
        (
            "defaultFailedBuildTTLSeconds",
            "failedBuildTTLSeconds",
            policy.runs.ttls.after_failed.is_some(),
        ),
    ] {
        let Some(value) = field(&config, &format!("spec.{from}")).filter(|_| valid) else {
            continue;
        };
        if field(&mutated.object, &format!("spec.{to}")).is_none() {
            object_at(&mut mutated.object, &["spec"]).insert(to.to_owned(), value.clone());
        }
    }
}

/// The parent, or `None` with a warning: a missing parent never blocks the run.
async fn lookup(
    parents: &dyn Parents,
    kind: ParentKind,
    namespace: &str,
    name: &str,
    mutated: &mut Mutated,
) -> Option<Value> {
    let what = kind.api_resource().kind;
    match parents.get(kind, namespace, name).await {
        Ok(Some(parent)) => Some(parent),
        Ok(None) => {
            mutated.warnings.push(format!(
                "{what} {name:?} not found in {namespace}: admitted without inherited retention settings"
            ));
            None
        }
        Err(error) => {
            tracing::warn!(%what, %name, %namespace, %error, "parent lookup failed");
            mutated.warnings.push(format!(
                "{what} {name:?} could not be read ({error}): admitted without inherited retention settings"
            ));
            None
        }
    }
}

fn own_by(object: &mut Value, parent: &Value) {
    let (Some(uid), Some(name)) = (
        field(parent, "metadata.uid").cloned(),
        field(parent, "metadata.name").cloned(),
    ) else {
        return;
    };
    let metadata = object_at(object, &["metadata"]);
    let references = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !references.is_array() {
        *references = Value::Array(Vec::new());
    }
    let Value::Array(references) = references else {
        return;
    };
    if references
        .iter()
        .any(|reference| reference.get("uid") == Some(&uid))
    {
        return;
    }
    references.push(json!({
        "apiVersion": parent.get("apiVersion").cloned().unwrap_or(json!("shipwright.io/v1beta1")),
        "kind": "Build",
        "name": name,
        "uid": uid,
    }));
}

fn set_metadata_entry(object: &mut Value, map: &str, key: &str, value: &str) {
    let entries = object_at(object, &["metadata", map]);
    if entries.get(key).and_then(Value::as_str) != Some(value) {
        entries.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// The JSON object at `path`, created (or replacing a non-object) where missing.
fn object_at<'a>(object: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut current = object;
    for key in path {
        current = ensure_object(current)
            .entry((*key).to_owned())
            .or_insert(Value::Null);
    }
    ensure_object(current)
}

fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("made an object above")
}
