//! Whether kube-retention's controller may delete objects of a kind, so admission can warn the
//! user who gives an object a TTL the controller could never act on — instead of the object
//! silently living forever. Answers come from SubjectAccessReviews for the controller's
//! ServiceAccount, cached per kind for [`CACHE_FOR`] (a newly aggregated ClusterRole is seen
//! within that time). Behind a trait so unit tests need no cluster.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

pub use kube_retention_common::kinds::CONTROLLER_VERBS as VERBS;
/// How long an answer is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(10);

pub type Missing<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<&'static str>, kube::Error>> + Send + 'a>>;
pub type Plural<'a> =
    Pin<Box<dyn Future<Output = Result<Option<String>, kube::Error>> + Send + 'a>>;

pub trait ControllerAccess: Send + Sync {
    /// The verbs of [`VERBS`] the controller lacks on `resource` of `group` (cluster-wide).
    fn missing<'a>(&'a self, group: &'a str, resource: &'a str) -> Missing<'a>;

    /// The plural under which the cluster serves `kind` of `api_version`, if it does.
    fn served<'a>(&'a self, api_version: &'a str, kind: &'a str) -> Plural<'a>;
}

/// Assumes every permission and every kind: for tests of everything else, and where checks are
/// switched off.
pub struct Granted;

impl ControllerAccess for Granted {
    fn missing<'a>(&'a self, _group: &'a str, _resource: &'a str) -> Missing<'a> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn served<'a>(&'a self, _api_version: &'a str, kind: &'a str) -> Plural<'a> {
        Box::pin(async move { Ok(Some(format!("{}s", kind.to_ascii_lowercase()))) })
    }
}

/// Asks the API server, as the webhook's ServiceAccount (`create subjectaccessreviews`).
pub struct Reviews {
    client: Client,
    /// The controller's user name, `system:serviceaccount:NAMESPACE:NAME`.
    user: String,
    cache: Mutex<HashMap<GroupResource, Answer>>,
}

type GroupResource = (String, String);
/// When the answer was given, and the verbs missing.
type Answer = (Instant, Vec<&'static str>);

impl Reviews {
    pub fn new(client: Client, user: String) -> Self {
        Self {
            client,
            user,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, key: &GroupResource) -> Option<Vec<&'static str>> {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (at, missing) = cache.get(key)?;
        (at.elapsed() < CACHE_FOR).then(|| missing.clone())
    }

    /// The groups a ServiceAccount's requests carry, for RBAC bound to groups.
    fn groups(&self) -> Vec<String> {
        let mut groups = vec![
            "system:serviceaccounts".to_owned(),
            "system:authenticated".to_owned(),
        ];
        if let Some(namespace) = self
            .user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .map(|(namespace, _)| namespace)
        {
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        groups
    }
}

impl ControllerAccess for Reviews {
    fn served<'a>(&'a self, api_version: &'a str, kind: &'a str) -> Plural<'a> {
        Box::pin(async move {
            let listed = match api_version.split_once('/') {
                None => self.client.list_core_api_resources(api_version).await,
                Some(_) => self.client.list_api_group_resources(api_version).await,
            };
            let resources = match listed {
                Ok(list) => list.resources,
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                Err(error) => return Err(error),
            };
            Ok(resources
                .into_iter()
                .find(|resource| resource.kind == kind && !resource.name.contains('/'))
                .map(|resource| resource.name))
        })
    }

    fn missing<'a>(&'a self, group: &'a str, resource: &'a str) -> Missing<'a> {
        Box::pin(async move {
            let key = (group.to_owned(), resource.to_owned());
            if let Some(missing) = self.cached(&key) {
                return Ok(missing);
            }
            let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
            let mut missing = Vec::new();
            for verb in VERBS {
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        user: Some(self.user.clone()),
                        groups: Some(self.groups()),
                        resource_attributes: Some(ResourceAttributes {
                            group: Some(group.to_owned()),
                            resource: Some(resource.to_owned()),
                            verb: Some(verb.to_owned()),
                            ..ResourceAttributes::default()
                        }),
                        ..SubjectAccessReviewSpec::default()
                    },
                    ..SubjectAccessReview::default()
                };
                let answer = api.create(&PostParams::default(), &review).await?;
                if !answer.status.is_some_and(|status| status.allowed) {
                    missing.push(verb);
                }
            }
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.insert(key, (Instant::now(), missing.clone()));
            Ok(missing)
        })
    }
}
