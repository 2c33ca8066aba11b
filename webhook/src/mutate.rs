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
use kube_retention_common::json::field;
use kube_retention_common::kinds::{Entry, Registry, Resource};
use kube_retention_common::{Expiry, OwnSettings, StampChange};
use serde_json::{Map, Value, json};

use crate::parents::Parents;

/// An object after mutation, and warnings for the user.
pub struct Mutated {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// What a mutation needs besides the object: the kinds handled and a way to read parents.
#[derive(Clone, Copy)]
pub struct Lookups<'a> {
    pub kinds: &'a Registry,
    pub parents: &'a dyn Parents,
}

/// Mutates `object` (already valid) for a CREATE (`creating`) or UPDATE in `namespace`. A kind
/// switched off in `kinds` is left as it is.
pub async fn mutate(
    lookups: Lookups<'_>,
    object: &Value,
    namespace: Option<&str>,
    creating: bool,
    now: Timestamp,
) -> Mutated {
    let mut mutated = Mutated {
        object: object.clone(),
        warnings: Vec::new(),
    };
    let Some(entry) = lookups.kinds.entry_for(object) else {
        return mutated;
    };
    if creating
        && let Some(namespace) = namespace
        && let Some(parent) = entry.parent()
        && let Some(parent_kind) = lookups.kinds.find_group_kind(parent.group, parent.kind)
        && let Some(name) = parent.name_in(object)
    {
        let parent = Parent {
            entry: &lookups.kinds[parent_kind],
            namespace,
            name: name.to_owned(),
        };
        inherit(lookups.parents, entry, &parent, &mut mutated).await;
    }
    stamp_as(entry, &mut mutated.object, now);
    mutated
}

/// Sets kube-retention's stamp (and the managed label) where the expiry is computable, and
/// removes a stamp no TTL stands behind any more.
pub fn stamp(object: &mut Value, now: Timestamp) {
    stamp_as(Registry::entry_of(object), object, now);
}

fn stamp_as(entry: &Entry, object: &mut Value, now: Timestamp) {
    let (policy, _) = OwnSettings::read_as(entry, object);
    let created = field(object, "metadata.creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|text| text.parse().ok());
    let progress = entry.finish.progress(object);
    let expiry = Expiry::compute(&policy, created, progress, now);
    match expiry.stamp_change(&policy.annotations) {
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

/// The parent a new run names.
struct Parent<'a> {
    entry: &'a Entry,
    namespace: &'a str,
    name: String,
}

/// Copies the parent's TTLs for its runs into the run's own TTL fields, field by field where the
/// run sets none, and makes the run owned by the parent where the parent asks for that.
async fn inherit(parents: &dyn Parents, run: &Entry, parent: &Parent<'_>, mutated: &mut Mutated) {
    let (Some(own), Some(runs)) = (run.fields.own, parent.entry.fields.runs) else {
        return;
    };
    let Some(found) = lookup(parents, parent, mutated).await else {
        return;
    };
    let (policy, _) = OwnSettings::read_as(parent.entry, &found);
    let ttls = policy.runs.ttls;
    for (from, to, name, valid) in [
        (
            runs.ttls.succeeded_path(),
            own.succeeded_path(),
            own.succeeded,
            ttls.after_succeeded.is_some(),
        ),
        (
            runs.ttls.failed_path(),
            own.failed_path(),
            own.failed,
            ttls.after_failed.is_some(),
        ),
    ] {
        let Some(value) = field(&found, &from).filter(|_| valid) else {
            continue;
        };
        if field(&mutated.object, &to).is_none() {
            let within: Vec<&str> = own.within.split('.').collect();
            object_at(&mut mutated.object, &within).insert(name.to_owned(), value.clone());
        }
    }
    if policy.runs.at_build_deletion {
        own_by(&mut mutated.object, &found, &parent.entry.resource);
    }
}

/// The parent, or `None` with a warning: a missing parent never blocks the run.
async fn lookup(
    parents: &dyn Parents,
    parent: &Parent<'_>,
    mutated: &mut Mutated,
) -> Option<Value> {
    let Parent {
        entry,
        namespace,
        ref name,
    } = *parent;
    let what = &entry.resource.kind;
    match parents.get(&entry.resource, namespace, name).await {
        Ok(Some(found)) => Some(found),
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

fn own_by(object: &mut Value, parent: &Value, kind: &Resource) {
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
        "apiVersion": parent.get("apiVersion").cloned().unwrap_or_else(|| json!(kind.api_version())),
        "kind": kind.kind,
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
