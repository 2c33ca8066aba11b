//! Whether kube-retention's controller may delete objects of a kind, so admission can warn the
//! user who gives an object a TTL the controller could never act on — instead of the object
//! silently living forever. Answers come from SubjectAccessReviews for the controller's
//! ServiceAccount, cached per kind for [`CACHE_FOR`] (a newly aggregated ClusterRole is seen
//! within that time). Behind a trait so unit tests need no cluster. [`Reviews`] also asks for
//! writers of retention settings (see [`crate::writers`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

pub use kube_retention_common::kinds::CONTROLLER_VERBS as VERBS;
/// How long an answer is reused: a role granted or taken away counts within this time.
pub const CACHE_FOR: Duration = Duration::from_secs(5);

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

/// Who a SubjectAccessReview asks about: the controller's ServiceAccount, or the writer of an
/// AdmissionRequest (its `userInfo`, extra and uid included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Subject {
    /// A ServiceAccount by its user name, with the groups its requests carry.
    pub fn service_account(user: &str) -> Self {
        let mut groups = vec![
            "system:serviceaccounts".to_owned(),
            "system:authenticated".to_owned(),
        ];
        if let Some((namespace, _)) = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        {
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        Self {
            user: user.to_owned(),
            groups,
            ..Self::default()
        }
    }
}

/// What is asked: a verb on a resource of a group, in a namespace (`None`: cluster-wide), on one
/// object by name or (`None`) on all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Request {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// Asks the API server, as the webhook's ServiceAccount (`create subjectaccessreviews`), and
/// remembers each answer for [`CACHE_FOR`], so a burst of admissions costs one review: requests
/// asking the same question at once share one review (when the answer expires under load too).
pub struct Reviews {
    client: Client,
    /// The controller's user name, `system:serviceaccount:NAMESPACE:NAME`.
    controller: Subject,
    cache: Mutex<HashMap<Question, (Instant, Answer)>>,
}

type Question = (Subject, Request);
/// Filled by the first asker; a failed review leaves it empty for the next to try.
type Answer = Arc<tokio::sync::OnceCell<bool>>;

/// Beyond this many questions remembered, the stale ones are dropped.
const CACHED_ANSWERS: usize = 10_000;

impl Reviews {
    pub fn new(client: Client, controller_user: &str) -> Self {
        Self {
            client,
            controller: Subject::service_account(controller_user),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `subject` may do `request`, from the cache while the answer is fresh.
    pub async fn review(&self, subject: &Subject, request: &Request) -> Result<bool, kube::Error> {
        let answer = {
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (subject.clone(), request.clone());
            match cache.get(&key) {
                Some((at, answer)) if at.elapsed() < CACHE_FOR => answer.clone(),
                _ => {
                    if cache.len() >= CACHED_ANSWERS {
                        cache.retain(|_, (at, _)| at.elapsed() < CACHE_FOR);
                    }
                    let answer = Answer::default();
                    cache.insert(key, (Instant::now(), answer.clone()));
                    answer
                }
            }
        };
        answer
            .get_or_try_init(|| self.ask(subject, request))
            .await
            .copied()
    }

    async fn ask(&self, subject: &Subject, request: &Request) -> Result<bool, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(subject.user.clone()),
                groups: Some(subject.groups.clone()),
                uid: subject.uid.clone(),
                extra: (!subject.extra.is_empty()).then(|| subject.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(request.group.clone()),
                    resource: Some(request.resource.clone()),
                    verb: Some(request.verb.to_owned()),
                    namespace: request.namespace.clone(),
                    name: request.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|status| status.allowed))
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
            let mut missing = Vec::new();
            for verb in VERBS {
                let request = Request {
                    verb,
                    group: group.to_owned(),
                    resource: resource.to_owned(),
                    ..Request::default()
                };
                if !self.review(&self.controller, &request).await? {
                    missing.push(verb);
                }
            }
            Ok(missing)
        })
    }
}
