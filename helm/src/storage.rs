//! What `helm uninstall` does for a release without hooks, read from Helm's own storage: the
//! release records are Secrets `sh.helm.release.v1.NAME.vN` labelled `owner=helm,name=NAME`,
//! whose `release` key holds the release as base64 of gzipped JSON. Uninstalling deletes the
//! objects of the latest record's manifest — except those annotated
//! `helm.sh/resource-policy: keep` — and then every record, so `helm list` no longer shows it.
//! A release with delete hooks is refused whole: running Helm's hooks is Helm's business. So is a
//! release with objects outside the Cleaner's namespace (or cluster-scoped, which the cleaner
//! finds out from discovery before it deletes anything), or of a kind a Cleaner does not
//! uninstall ([`kube_retention_common::cleaner::helm`]): the release records are forgeable by
//! whoever may write Secrets there, so the controller's power never reaches beyond what the
//! Cleaner's writer was checked for on their say. For the same reason a Secret counts as a record
//! only when named as Helm names them, and each object is deleted only when Helm's annotations
//! give it to the release (`uninstall.rs`).

use std::borrow::Borrow;
use std::io::Read;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube_retention_common::cleaner::helm::UNINSTALLABLE_KINDS;
use kube_retention_common::kinds::qualified;
use serde::Deserialize;

/// The label selector of a release's records.
pub fn records_selector(release: &str) -> String {
    format!("owner=helm,name={release}")
}

/// The annotation with which Helm leaves an object behind on uninstall.
const RESOURCE_POLICY: &str = "helm.sh/resource-policy";
const KEEP: &str = "keep";
/// Hook events that run on uninstall.
const DELETE_HOOKS: [&str; 2] = ["pre-delete", "post-delete"];

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HelmError {
    #[error("release record {record} cannot be read: {reason}")]
    Unreadable { record: String, reason: String },
    #[error(
        "release {release} has delete hooks ({}); uninstall it with helm, which runs them",
        .hooks.join(", ")
    )]
    Hooks { release: String, hooks: Vec<String> },
    #[error(
        "release {release} holds objects outside namespace {namespace} ({}); a Cleaner deletes only in its own namespace: uninstall it with helm",
        .objects.join(", ")
    )]
    Outside {
        release: String,
        namespace: String,
        objects: Vec<String>,
    },
    #[error(
        "release {release} holds objects of kinds a Cleaner does not uninstall ({}); it deletes only {}: uninstall it with helm",
        .objects.join(", "),
        uninstallable_kinds()
    )]
    NotUninstallable {
        release: String,
        objects: Vec<String>,
    },
    #[error(
        "release {release} has more than {most} Secrets labelled as its records (Helm keeps 10 by default); a Cleaner reads no more: uninstall it with helm"
    )]
    TooManyRecords { release: String, most: usize },
}

/// The kinds a Cleaner uninstalls, for a message: `Secret, ConfigMap, …, Deployment.apps, …`.
fn uninstallable_kinds() -> String {
    let kinds: Vec<String> = UNINSTALLABLE_KINDS
        .iter()
        .map(|known| qualified(known.kind, known.group))
        .collect();
    kinds.join(", ")
}

impl HelmError {
    /// The Cleaner's `Ready` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "HelmReleaseUnreadable",
            Self::Hooks { .. } => "HelmReleaseHasDeleteHooks",
            Self::Outside { .. } => "HelmReleaseOutsideNamespace",
            Self::NotUninstallable { .. } => "HelmReleaseKindNotUninstallable",
            Self::TooManyRecords { .. } => "HelmReleaseTooManyRecords",
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Release {
    pub name: String,
    #[serde(default)]
    pub version: i64,
    #[serde(default)]
    pub manifest: String,
    #[serde(default)]
    pub hooks: Vec<Hook>,
}

#[derive(Debug, Deserialize)]
pub struct Hook {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub events: Vec<String>,
}

/// An object of a release's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// What uninstalling a release deletes and leaves.
#[derive(Debug, Default, PartialEq)]
pub struct Uninstall {
    pub delete: Vec<ManifestObject>,
    pub keep: Vec<ManifestObject>,
}

/// The most a record's release may take decompressed: 16 MiB, some sixteen times the most a
/// record holds (etcd's 1.5 MiB, base64 of gzip), as Helm's own releases of large charts do.
/// gzip expands a thousandfold at most, and a record is a Secret any namespace editor may write:
/// past the bound the rest is not decompressed, and the record is unreadable.
pub const RELEASE_BYTES: u64 = 16 * 1024 * 1024;

/// The release a record holds.
pub fn decode(record: &Secret) -> Result<Release, HelmError> {
    let name = record.metadata.name.clone().unwrap_or_default();
    let unreadable = |reason: String| HelmError::Unreadable {
        record: name.clone(),
        reason,
    };
    let encoded = record
        .data
        .as_ref()
        .and_then(|data| data.get("release"))
        .ok_or_else(|| unreadable("no `release` key".to_owned()))?;
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(&encoded.0)
        .map_err(|error| unreadable(format!("not base64: {error}")))?;
    let mut json = Vec::new();
    if compressed.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(&compressed[..])
            .take(RELEASE_BYTES + 1)
            .read_to_end(&mut json)
            .map_err(|error| unreadable(format!("not gzip: {error}")))?;
        if json.len() as u64 > RELEASE_BYTES {
            return Err(unreadable(format!(
                "more than {} MiB decompressed",
                RELEASE_BYTES / (1024 * 1024)
            )));
        }
    } else {
        json = compressed;
    }
    serde_json::from_slice(&json).map_err(|error| unreadable(format!("not a release: {error}")))
}

/// Whether `name` is a record of `release` as Helm names them, `sh.helm.release.v1.RELEASE.vN`:
/// a label is all a Secret needs to be listed as one, and only a record is deleted as one.
pub fn is_record(name: &str, release: &str) -> bool {
    name.strip_prefix(RECORD_PREFIX)
        .and_then(|rest| rest.strip_prefix(release))
        .and_then(|rest| rest.strip_prefix(".v"))
        .is_some_and(|version| !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()))
}

/// How Helm's records are named, before the release's name.
const RECORD_PREFIX: &str = "sh.helm.release.v1.";

/// The latest of a release's records (the highest `version` label; of equals, the last).
pub fn latest<R: Borrow<Secret>>(records: impl IntoIterator<Item = R>) -> Option<R> {
    records
        .into_iter()
        .max_by_key(|record| version(record.borrow()))
}

/// A record's `version` label, 0 where it has none.
fn version(record: &Secret) -> i64 {
    record
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get("version"))
        .and_then(|version| version.parse::<i64>().ok())
        .unwrap_or(0)
}

impl ManifestObject {
    /// `Kind/name`, or `Kind/namespace/name` when it names a namespace.
    pub fn described(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{}/{namespace}/{}", self.kind, self.name),
            None => format!("{}/{}", self.kind, self.name),
        }
    }
}

/// What uninstalling `release`, stored in `namespace`, deletes, or why it is refused.
pub fn plan(release: &Release, namespace: &str) -> Result<Uninstall, HelmError> {
    let hooks: Vec<String> = release
        .hooks
        .iter()
        .filter(|hook| {
            hook.events
                .iter()
                .any(|event| DELETE_HOOKS.contains(&event.as_str()))
        })
        .map(|hook| hook.name.clone())
        .collect();
    if !hooks.is_empty() {
        return Err(HelmError::Hooks {
            release: release.name.clone(),
            hooks,
        });
    }
    let mut uninstall = Uninstall::default();
    for document in serde_norway::Deserializer::from_str(&release.manifest) {
        let Ok(object) = serde_json::Value::deserialize(document) else {
            continue;
        };
        let text = |pointer: &str| object.pointer(pointer).and_then(|value| value.as_str());
        let (Some(api_version), Some(kind), Some(name)) =
            (text("/apiVersion"), text("/kind"), text("/metadata/name"))
        else {
            continue;
        };
        let resource = ManifestObject {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: text("/metadata/namespace").map(str::to_owned),
            name: name.to_owned(),
        };
        let policy = object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(RESOURCE_POLICY))
            .and_then(|value| value.as_str());
        if policy.is_some_and(|policy| policy.trim().eq_ignore_ascii_case(KEEP)) {
            uninstall.keep.push(resource);
        } else {
            uninstall.delete.push(resource);
        }
    }
    let outside: Vec<String> = uninstall
        .delete
        .iter()
        .filter(|resource| {
            resource
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != namespace)
        })
        .map(ManifestObject::described)
        .collect();
    if !outside.is_empty() {
        return Err(outside_namespace(release, namespace, outside));
    }
    // Helm deletes in reverse install order: dependents before what they depend on.
    uninstall.delete.reverse();
    Ok(uninstall)
}

/// The refusal of a release whose `objects` lie outside `namespace`.
pub fn outside_namespace(release: &Release, namespace: &str, objects: Vec<String>) -> HelmError {
    HelmError::Outside {
        release: release.name.clone(),
        namespace: namespace.to_owned(),
        objects,
    }
}
