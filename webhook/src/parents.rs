//! Looking up the parent a new run inherits from (a Shipwright Build for a BuildRun, a
//! BuildConfig for an OpenShift-style Build — whatever the kind registry names). Behind a trait
//! so unit tests need no cluster.
//!
//! A parent is any object its namespace's editors wrote, as large as etcd stores (1.5 MiB),
//! read once for every run created: [`ApiParents`] decodes only what admission reads of it
//! (its metadata and its kind's retention fields, [`crate::review::reads`]), from the API
//! server's text, and reads [`PARENTS_AT_ONCE`] at a time, so the texts held at once are
//! bounded whatever the parents are.

use std::future::Future;
use std::pin::Pin;

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube_retention_common::Registry;
use kube_retention_common::kinds::Resource;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::limits::DEFAULT_DECODED_PER_REVIEW;
use crate::review::lean::{self, Budget, Keep};
use crate::review::reads;

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("unreadable object: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Option<Value>, LookupError>> + Send + 'a>>;

pub trait Parents: Send + Sync {
    /// The parent as JSON (at least what admission reads of it), `Ok(None)` if it does not
    /// exist.
    fn get<'a>(&'a self, kind: &'a Resource, namespace: &'a str, name: &'a str) -> Lookup<'a>;
}

/// Parents read at once: their texts, each up to etcd's 1.5 MiB, are what they hold.
pub const PARENTS_AT_ONCE: usize = 4;

/// Reads parents from the API server with the webhook's own ServiceAccount (`get` only).
pub struct ApiParents {
    client: Client,
    at_once: Semaphore,
}

impl ApiParents {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            at_once: Semaphore::new(PARENTS_AT_ONCE),
        }
    }
}

/// What admission reads of a parent of `kind`: its type, metadata and retention fields.
fn plan(kind: &Resource) -> Keep {
    let entry = Registry::builtin()
        .find_group_kind(&kind.group, &kind.kind)
        .map(|id| &Registry::builtin()[id]);
    let mut plan = reads::object(entry);
    plan.add("apiVersion", Keep::All);
    plan.add("kind", Keep::All);
    plan
}

impl Parents for ApiParents {
    fn get<'a>(&'a self, kind: &'a Resource, namespace: &'a str, name: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let _turn = self.at_once.acquire().await.expect("never closed");
            let resource = kind.api_resource();
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), namespace, &resource);
            let request = kube::core::Request::new(api.resource_url())
                .get(name, &kube::api::GetParams::default())
                .map_err(kube::Error::BuildRequest)?;
            let text = match self.client.request_text(request).await {
                Ok(text) => text,
                Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(None),
                Err(error) => return Err(error.into()),
            };
            let mut unshared = ();
            let mut budget = Budget::new(DEFAULT_DECODED_PER_REVIEW, &mut unshared);
            Ok(Some(lean::decode(&text, &plan(kind), &mut budget)?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_parent_is_read_for_its_type_names_and_run_settings_alone() {
        let build = json!({
            "apiVersion": "shipwright.io/v1beta1", "kind": "Build",
            "metadata": {"name": "hello", "uid": "u", "managedFields": [{}]},
            "spec": {"source": {"git": {"url": "https://example.com"}},
                     "paramValues": [0, 0, 0],
                     "retention": {"ttlAfterSucceeded": "1h", "atBuildDeletion": true,
                                   "succeededLimit": 3}}});
        let kind = Resource::new("shipwright.io", "v1beta1", "Build", "builds");
        let mut unshared = ();
        let mut budget = Budget::new(DEFAULT_DECODED_PER_REVIEW, &mut unshared);
        let read = lean::decode(&build.to_string(), &plan(&kind), &mut budget).unwrap();
        assert_eq!(
            read,
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
                   "metadata": {"name": "hello", "uid": "u"},
                   "spec": {"retention": {"ttlAfterSucceeded": "1h", "atBuildDeletion": true,
                                          "succeededLimit": 3}}})
        );
    }
}
