//! A Helm release uninstalled on a Cleaner's say, trusting its records no further than Helm's
//! own marks on the objects. The records are Secrets, forgeable by whoever may write Secrets in
//! the namespace, and the controller deletes with its own power, so:
//!
//! - the release is read and planned before anything of the group is deleted ([`read`]): only
//!   Secrets named as Helm names its records count as records, and a release that would reach
//!   outside the namespace or beyond the kinds a Cleaner uninstalls is refused whole;
//! - each object its latest record lists is read (GET) just before its deletion and deleted only
//!   when Helm's annotations give it to the release in this namespace
//!   ([`ownership`]); one that is not is left and reported ([`Uninstalled::skipped`]), and the rest of
//!   the release is still uninstalled: its owned objects are Helm's, whatever else a forged
//!   record lists;
//! - the DELETE carries the uid and resourceVersion of that read, so an object changed between
//!   the two (its annotations taken away, a namesake created) is not deleted: the clean fails
//!   and is tried again, reading afresh;
//! - the records go last, with the uid and resourceVersion they were listed with.
//!
//! What reading a release holds is bounded whatever the namespace's Secrets are: the records
//! are listed [`RECORDS_PAGE`] a page (each page within the client's page bound), keeping of
//! each only what deleting it needs and the latest one whole; a release of more than
//! [`MOST_RECORDS`] is refused (Helm keeps 10 by default); its release is decompressed within
//! [`helm::RELEASE_BYTES`]; and each object is read lean, within the bound of one object.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DeleteParams, ListParams, Preconditions, PropagationPolicy};
use kube_retention_common::cleaner::helm::{ownership, uninstallable};
use kube_retention_runtime::discovery;

use kube_retention_io::deletion::Sent;
use kube_retention_io::lean::{self, LeanObject};

use crate::storage::{self as helm, HelmError, ManifestObject};

/// How the caller deletes: its client, and each DELETE sent its own way (the Cleaners': through
/// their circuit breaker and request budget), so an uninstall spends what the caller's other
/// deletions spend.
#[allow(async_fn_in_trait)] // called generically, never as a trait object
pub trait Deleter {
    fn client(&self) -> &kube::Client;

    /// Sends one DELETE of `name` with `params`.
    async fn delete<K>(
        &self,
        api: &Api<K>,
        name: &str,
        params: &DeleteParams,
    ) -> kube::Result<Sent>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug;
}

/// Why an uninstall did not happen, or stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UninstallError {
    /// Refused whole, before anything was deleted.
    #[error(transparent)]
    Refused(#[from] HelmError),
    /// A request failed, or an object changed since it was read: the records are kept, to be
    /// tried again.
    #[error("{0}")]
    Failed(String),
}

/// What an uninstall deleted, and what of the release it left, why.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Uninstalled {
    /// `Kind/name` of each object deleted.
    pub deleted: Vec<String>,
    /// `Kind/name: why`, for what the records list but Helm's annotations do not give to it.
    pub skipped: Vec<String>,
    /// The release, once its records are gone.
    pub release: Option<String>,
}

/// A release read and planned, nothing deleted yet.
pub struct Release {
    name: String,
    /// Its records, as listed.
    records: Vec<Secret>,
    /// What its latest record lists for deletion, resolved, in the order Helm deletes them.
    objects: Vec<(ApiResource, ManifestObject)>,
    /// Secrets labelled as its records but not named as Helm names them: left alone.
    skipped: Vec<String>,
}

impl Release {
    /// How many DELETEs its uninstall sends at most: the objects its latest record lists (those
    /// Helm's annotations do not give to it are left) and its records.
    pub fn deletions(&self) -> usize {
        self.objects.len() + self.records.len()
    }
}

/// The records of a release listed in one page.
pub const RECORDS_PAGE: u32 = 100;

/// The most Secrets labelled as one release's records that are read: Helm keeps 10 by default
/// (`--history-max`), and a release of more is refused, whoever forged them.
pub const MOST_RECORDS: usize = 1000;

/// Reads release `name`'s records in `namespace` and plans its uninstall; refuses a release with
/// delete hooks, with objects outside `namespace`, of kinds a Cleaner does not uninstall, or of
/// more than [`MOST_RECORDS`] records.
pub async fn read(
    deleter: &impl Deleter,
    name: &str,
    namespace: &str,
) -> Result<Release, UninstallError> {
    let secrets: Api<Secret> = Api::namespaced(deleter.client().clone(), namespace);
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    let mut latest: Option<Secret> = None;
    let mut listed = 0usize;
    let mut token: Option<String> = None;
    loop {
        let mut page = ListParams::default()
            .labels(&helm::records_selector(name))
            .limit(RECORDS_PAGE);
        if let Some(token) = &token {
            page = page.continue_token(token);
        }
        let page = secrets.list(&page).await.map_err(|error| {
            UninstallError::Failed(format!(
                "listing the records of Helm release {name}: {error}"
            ))
        })?;
        listed += page.items.len();
        if listed > MOST_RECORDS {
            return Err(HelmError::TooManyRecords {
                release: name.to_owned(),
                most: MOST_RECORDS,
            }
            .into());
        }
        for secret in page.items {
            let secret_name = secret.metadata.name.clone().unwrap_or_default();
            if !helm::is_record(&secret_name, name) {
                skipped.push(format!(
                    "Secret/{secret_name}: labelled as a record of release {name} but not named \
                     as Helm names them (sh.helm.release.v1.{name}.vN)"
                ));
                continue;
            }
            records.push(Secret {
                metadata: kept_of(&secret.metadata),
                ..Secret::default()
            });
            latest = helm::latest(latest.into_iter().chain([secret]));
        }
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => break,
        }
    }
    let objects = match &latest {
        Some(record) => {
            let decoded = helm::decode(record)?;
            let plan = helm::plan(&decoded, namespace)?;
            resolve(deleter, &decoded, namespace, plan.delete).await?
        }
        None => Vec::new(),
    };
    Ok(Release {
        name: name.to_owned(),
        records,
        objects,
        skipped,
    })
}

/// The API of each object a release's uninstall deletes, found before anything is deleted; a
/// cluster-scoped one refuses the release whole, and so does one of a kind a Cleaner does not
/// uninstall.
async fn resolve(
    deleter: &impl Deleter,
    release: &helm::Release,
    namespace: &str,
    objects: Vec<ManifestObject>,
) -> Result<Vec<(ApiResource, ManifestObject)>, UninstallError> {
    let mut resolved = Vec::new();
    let mut cluster_scoped = Vec::new();
    let mut not_uninstallable = Vec::new();
    for resource in objects {
        let unresolved = |error: String| {
            UninstallError::Failed(format!(
                "looking up the kind of {} of Helm release {}: {error}",
                resource.described(),
                release.name
            ))
        };
        let served = discovery::served(deleter.client(), &resource.api_version, &resource.kind)
            .await
            .map_err(|error| unresolved(error.to_string()))?
            .ok_or_else(|| unresolved("not served by this cluster".to_owned()))?;
        if !served.namespaced {
            cluster_scoped.push(resource.described());
        } else if !uninstallable(&resource.api_version, &resource.kind) {
            not_uninstallable.push(resource.described());
        } else {
            resolved.push((served.resource, resource));
        }
    }
    if !cluster_scoped.is_empty() {
        return Err(helm::outside_namespace(release, namespace, cluster_scoped).into());
    }
    if !not_uninstallable.is_empty() {
        return Err(HelmError::NotUninstallable {
            release: release.name.clone(),
            objects: not_uninstallable,
        }
        .into());
    }
    Ok(resolved)
}

/// Deletes what of `release` Helm's annotations give to it in `namespace`, then its records;
/// answers what it deleted and left. A failure, or an object changed since it was read, stops
/// the uninstall with its records kept, to be tried again.
pub async fn uninstall(
    deleter: &impl Deleter,
    release: Release,
    namespace: &str,
) -> Result<Uninstalled, UninstallError> {
    let mut uninstalled = Uninstalled::default();
    let name = &release.name;
    for (resource, object) in &release.objects {
        // Read lean, within the bound of one object: only its metadata is read, and past the
        // bound it comes with its identity alone, so its ownership cannot be read.
        let api: Api<LeanObject> =
            Api::namespaced_with(deleter.client().clone(), namespace, resource);
        let what = format!("{}/{}", object.kind, object.name);
        let failed = |doing: &str, error: kube::Error| {
            UninstallError::Failed(format!("{doing} {what} of Helm release {name}: {error}"))
        };
        let found = match api.get(&object.name).await {
            Ok(LeanObject(found)) => found,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => return Err(failed("reading", error)),
        };
        if lean::past_bound(&found) {
            let why = "it holds more than the controller decodes of one object";
            tracing::warn!(release = %name, %namespace, object = %what, why, "not deleted: its ownership cannot be read");
            uninstalled.skipped.push(format!("{what}: {why}"));
            continue;
        }
        if let Err(why) = ownership(found.metadata.annotations.as_ref(), name, namespace) {
            tracing::warn!(release = %name, %namespace, object = %what, %why, "not deleted: not the release's");
            uninstalled.skipped.push(format!("{what}: {why}"));
            continue;
        }
        let params = exactly(&found.metadata, Some(PropagationPolicy::Background));
        match deleter
            .delete(&api, &object.name, &params)
            .await
            .map_err(|error| failed("deleting", error))?
        {
            Sent::Deleted => uninstalled.deleted.push(what),
            Sent::Gone => {}
            Sent::Refused => return Err(changed(&what, name)),
        }
    }
    let secrets: Api<Secret> = Api::namespaced(deleter.client().clone(), namespace);
    for record in &release.records {
        let record_name = record.metadata.name.clone().unwrap_or_default();
        let sent = deleter
            .delete(&secrets, &record_name, &exactly(&record.metadata, None))
            .await
            .map_err(|error| {
                UninstallError::Failed(format!(
                    "deleting record {record_name} of Helm release {name}: {error}"
                ))
            })?;
        if sent == Sent::Refused {
            return Err(changed(&format!("record {record_name}"), name));
        }
    }
    uninstalled.skipped.extend(release.skipped);
    if !release.records.is_empty() {
        uninstalled.release = Some(release.name);
    }
    Ok(uninstalled)
}

/// What deleting a record needs of it: its name, uid and resourceVersion.
fn kept_of(metadata: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: metadata.name.clone(),
        namespace: metadata.namespace.clone(),
        uid: metadata.uid.clone(),
        resource_version: metadata.resource_version.clone(),
        ..ObjectMeta::default()
    }
}

/// A DELETE of exactly the version `read`: its uid and resourceVersion as preconditions.
fn exactly(read: &ObjectMeta, propagation: Option<PropagationPolicy>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: read.uid.clone(),
            resource_version: read.resource_version.clone(),
        }),
        propagation_policy: propagation,
        ..DeleteParams::default()
    }
}

fn changed(what: &str, release: &str) -> UninstallError {
    UninstallError::Failed(format!(
        "{what} of Helm release {release} changed since it was read (its uid or resourceVersion \
         precondition was refused): not deleted, read again at the next attempt"
    ))
}
