//! Looking up the parent a new run inherits from (a Shipwright Build for a BuildRun, a
//! BuildConfig for an OpenShift-style Build — whatever the kind registry names). Behind a trait
//! so unit tests need no cluster.

use std::future::Future;
use std::pin::Pin;

use kube::api::DynamicObject;
use kube::{Api, Client};
use kube_retention_common::kinds::Resource;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("unreadable object: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Option<Value>, LookupError>> + Send + 'a>>;

pub trait Parents: Send + Sync {
    /// The parent as JSON, `Ok(None)` if it does not exist.
    fn get<'a>(&'a self, kind: &'a Resource, namespace: &'a str, name: &'a str) -> Lookup<'a>;
}

/// Reads parents from the API server with the webhook's own ServiceAccount (`get` only).
pub struct ApiParents(pub Client);

impl Parents for ApiParents {
    fn get<'a>(&'a self, kind: &'a Resource, namespace: &'a str, name: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let resource = kind.api_resource();
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.0.clone(), namespace, &resource);
            match api.get_opt(name).await? {
                Some(object) => Ok(Some(serde_json::to_value(object)?)),
                None => Ok(None),
            }
        })
    }
}
