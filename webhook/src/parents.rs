//! Looking up the parent a new run inherits from: a Shipwright Build for a BuildRun, a
//! BuildConfig for an OpenShift-style Build. Behind a trait so unit tests need no cluster.

use std::future::Future;
use std::pin::Pin;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::Value;

/// The kinds of parent a run can inherit from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParentKind {
    ShipwrightBuild,
    BuildConfig,
}

impl ParentKind {
    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Self::ShipwrightBuild => ("shipwright.io", "v1beta1", "Build", "builds"),
            Self::BuildConfig => ("build.openshift.io", "v1", "BuildConfig", "buildconfigs"),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }
}

pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Option<Value>, String>> + Send + 'a>>;

pub trait Parents: Send + Sync {
    /// The parent as JSON, `Ok(None)` if it does not exist, `Err` with a reason otherwise.
    fn get<'a>(&'a self, kind: ParentKind, namespace: &'a str, name: &'a str) -> Lookup<'a>;
}

/// Reads parents from the API server with the webhook's own ServiceAccount (`get` only).
pub struct ApiParents(pub Client);

impl Parents for ApiParents {
    fn get<'a>(&'a self, kind: ParentKind, namespace: &'a str, name: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.0.clone(), namespace, &kind.api_resource());
            match api.get_opt(name).await {
                Ok(found) => found
                    .map(|object| serde_json::to_value(object).map_err(|error| error.to_string()))
                    .transpose(),
                Err(error) => Err(error.to_string()),
            }
        })
    }
}
