//! Whether kube-retention's controller may delete objects of a kind, so admission can warn the
//! user who gives an object a TTL the controller could never act on — instead of the object
//! silently living forever. Answers come from SubjectAccessReviews for the controller's
//! ServiceAccount, one per verb and kind. Behind a trait so unit tests need no cluster.
//! [`Reviews`] also asks for writers of retention settings (see [`crate::writers`]).
//!
//! Every answer, the controller's and each writer's, is remembered per question (who, and which
//! verb on what) in a [`moka`] cache, for its two semantics we would otherwise write by hand: a
//! time to live ([`CACHE_FOR`]: a role granted or taken away, a newly aggregated ClusterRole,
//! counts within that time) and single flight (admissions asking the same question at once,
//! also when the answer has just expired under load, share one review). A failed review is
//! not remembered: the next asker tries again. Discovery's answers (the resources a group
//! version serves, or that it serves none) are remembered the same way for
//! [`DISCOVERY_CACHE_FOR`], one lookup per group version: a CRD installed since counts within
//! that time, and until then its kind is asked about as every resource of its group, the
//! stricter question.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::api::PostParams;
use kube::{Api, Client};
use kube_retention_runtime::discovery::{find, group_version};
use moka::future::Cache;
use ring::digest;

pub use kube_retention_common::access::{Request, Subject};
pub use kube_retention_common::kinds::CONTROLLER_VERBS as VERBS;
/// How long an answer is reused: a role granted or taken away counts within this time.
pub const CACHE_FOR: Duration = Duration::from_secs(5);
/// How long discovery's answer for a kind is reused: a CRD installed or removed counts within
/// this time (the controller looks again every 30 s).
pub const DISCOVERY_CACHE_FOR: Duration = Duration::from_secs(10);

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

/// Asks the API server, as the webhook's ServiceAccount (`create subjectaccessreviews`), and
/// remembers each answer for [`CACHE_FOR`], so a burst of admissions costs one review: requests
/// asking the same question at once share one review (when the answer expires under load too).
pub struct Reviews {
    client: Client,
    /// The controller's user name, `system:serviceaccount:NAMESPACE:NAME`.
    controller: Subject,
    answers: Cache<Question, bool>,
    /// By apiVersion; `None`: not served.
    group_versions: Cache<String, Option<Arc<[APIResource]>>>,
}

/// A question as the cache keeps it: the SHA-256 of who asks what, so that an entry takes the
/// same few bytes whatever a review's `userInfo` holds (a pod posting reviews to the webhook may
/// send a megabyte of groups, and 10,000 entries of those would be gigabytes).
type Question = [u8; 32];

/// The digest of `subject` asking `request`: every field length-prefixed, in a fixed order, so
/// no two questions share an encoding.
fn question(subject: &Subject, request: &Request) -> Question {
    fn put(digest: &mut digest::Context, bytes: &[u8]) {
        digest.update(&(bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    fn put_optional(digest: &mut digest::Context, text: Option<&String>) {
        match text {
            Some(text) => {
                put(digest, b"some");
                put(digest, text.as_bytes());
            }
            None => put(digest, b"none"),
        }
    }
    fn put_list(digest: &mut digest::Context, texts: &[String]) {
        put(digest, &(texts.len() as u64).to_le_bytes());
        for text in texts {
            put(digest, text.as_bytes());
        }
    }
    let mut digest = digest::Context::new(&digest::SHA256);
    put(&mut digest, subject.user.as_bytes());
    put_list(&mut digest, &subject.groups);
    put_optional(&mut digest, subject.uid.as_ref());
    put(&mut digest, &(subject.extra.len() as u64).to_le_bytes());
    for (key, values) in &subject.extra {
        put(&mut digest, key.as_bytes());
        put_list(&mut digest, values);
    }
    put(&mut digest, request.verb.as_bytes());
    put(&mut digest, request.group.as_bytes());
    put(&mut digest, request.resource.as_bytes());
    put_optional(&mut digest, request.namespace.as_ref());
    put_optional(&mut digest, request.name.as_ref());
    let mut question = [0; 32];
    question.copy_from_slice(digest.finish().as_ref());
    question
}

/// Beyond this many questions remembered, those least likely to be asked again are dropped.
const CACHED_ANSWERS: u64 = 10_000;

impl Reviews {
    pub fn new(client: Client, controller_user: &str) -> Self {
        Self::caching_for(client, controller_user, CACHE_FOR)
    }

    /// As [`Reviews::new`], with answers reused for `time_to_live` instead of [`CACHE_FOR`]: for
    /// tests of the expiry, which cannot pause the cache's clock (it is not tokio's).
    pub fn caching_for(client: Client, controller_user: &str, time_to_live: Duration) -> Self {
        Self {
            client,
            controller: Subject::service_account(controller_user),
            answers: Cache::builder()
                .max_capacity(CACHED_ANSWERS)
                .time_to_live(time_to_live)
                .build(),
            group_versions: Cache::builder()
                .max_capacity(CACHED_ANSWERS)
                .time_to_live(DISCOVERY_CACHE_FOR)
                .build(),
        }
    }

    /// Whether `subject` may do `request`, from the cache while the answer is fresh; askers of
    /// the same question at once wait for one review, and share its error if it fails.
    pub async fn review(&self, subject: &Subject, request: &Request) -> Result<bool, kube::Error> {
        self.answers
            .try_get_with(question(subject, request), self.ask(subject, request))
            .await
            .map_err(unshared)
    }

    async fn ask(&self, subject: &Subject, request: &Request) -> Result<bool, kube::Error> {
        let review = request.review_for(subject);
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|status| status.allowed))
    }
}

/// The error of a review, for one of the askers that share it. kube's errors cannot be cloned:
/// an asker holding the only reference gets it as it is, the others the API server's Status (a
/// refusal stays a refusal with its code) or, for any other failure, the shared error as the
/// cause of their own.
fn unshared(error: Arc<kube::Error>) -> kube::Error {
    Arc::try_unwrap(error).unwrap_or_else(|shared| match shared.as_ref() {
        kube::Error::Api(status) => kube::Error::Api(status.clone()),
        _ => kube::Error::Service(Box::new(shared)),
    })
}

impl ControllerAccess for Reviews {
    fn served<'a>(&'a self, api_version: &'a str, kind: &'a str) -> Plural<'a> {
        Box::pin(async move {
            let listing = async {
                let listed = group_version(&self.client, api_version).await?;
                Ok(listed.map(Arc::from))
            };
            let resources = self
                .group_versions
                .try_get_with(api_version.to_owned(), listing)
                .await
                .map_err(unshared)?;
            let served = find(resources.as_deref().unwrap_or_default(), api_version, kind);
            Ok(served.map(|served| served.resource.plural))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn texts() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec("[ab:]{0,3}", 0..4)
    }

    prop_compose! {
        fn subjects()(user in "[ab:]{0,3}", groups in texts(), uid in prop::option::of("[ab]{0,2}"),
                      extra in prop::collection::btree_map("[ab]{0,2}", texts(), 0..3)) -> Subject {
            Subject { user, groups, uid, extra: extra.into_iter().collect::<BTreeMap<_, _>>() }
        }
    }

    prop_compose! {
        fn requests()(verb in prop::sample::select(vec!["delete", "list"]), group in "[ab]{0,2}",
                      resource in "[ab]{0,2}", namespace in prop::option::of("[ab]{0,2}"),
                      name in prop::option::of("[ab]{0,2}")) -> Request {
            Request { verb, group, resource, namespace, name }
        }
    }

    proptest! {
        /// The cache's key tells questions apart exactly as the questions do, on texts built
        /// from few characters so that neighbours ("a", "b" against "ab"; none against "") meet.
        #[test]
        fn a_question_s_digest_is_its_identity(
            first in (subjects(), requests()),
            second in (subjects(), requests()),
        ) {
            let same = first == second;
            prop_assert_eq!(
                question(&first.0, &first.1) == question(&second.0, &second.1),
                same
            );
        }
    }

    #[test]
    fn neighbouring_questions_differ() {
        let subject = |groups: &[&str], uid: Option<&str>| Subject {
            user: "alice".to_owned(),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
            uid: uid.map(str::to_owned),
            extra: BTreeMap::new(),
        };
        let request = Request {
            verb: "delete",
            ..Request::default()
        };
        let asked = |subject: &Subject| question(subject, &request);
        assert_ne!(
            asked(&subject(&["a", "b"], None)),
            asked(&subject(&["ab"], None))
        );
        assert_ne!(
            asked(&subject(&["ab", ""], None)),
            asked(&subject(&["a", "b"], None))
        );
        assert_ne!(asked(&subject(&[], None)), asked(&subject(&[], Some(""))));
        assert_eq!(asked(&subject(&["a"], None)), asked(&subject(&["a"], None)));
    }
}
