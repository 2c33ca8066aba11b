//! The mocked API server (`kube-retention-apimock`) for `access::Reviews`: the test takes each
//! request the client sends, checks it, and answers it.
//! Shared by the access tests (`access_reviews`, `access_served`).

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a subset

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube_retention_apimock::Received;
use kube_retention_webhook::access::{Request, Reviews, Subject};
use serde_json::{Value, json};

pub const CONTROLLER: &str = "system:serviceaccount:kube-retention:kube-retention-controller";
pub const REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

pub fn start(time_to_live: Duration) -> (ApiServer, Arc<Reviews>) {
    let (client, server) = kube_retention_apimock::pair();
    let reviews = Reviews::caching_for(client, CONTROLLER, time_to_live);
    (ApiServer(server), Arc::new(reviews))
}

/// The mocked API server, with the answers these tests give.
pub struct ApiServer(pub kube_retention_apimock::ApiServer);

impl ApiServer {
    /// The next request, which has no query string (none of these requests has parameters);
    /// `None` if none comes.
    pub async fn next(&mut self) -> Option<Received> {
        let received = self.0.next().await?;
        assert!(received.query.is_empty(), "{}", received.line());
        Some(received)
    }

    /// Answers the next request, which must be a SubjectAccessReview, with `allowed`; returns
    /// the review's spec.
    pub async fn review(&mut self, allowed: bool) -> Value {
        let seen = self.next().await.expect("a SubjectAccessReview");
        assert_eq!(seen.line(), format!("POST {REVIEWS}"));
        assert_eq!(seen.body["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(seen.body["kind"], "SubjectAccessReview");
        let spec = seen.body["spec"].clone();
        let answer = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                            "metadata": {}, "spec": spec, "status": {"allowed": allowed}});
        seen.reply(200, &answer);
        spec
    }

    /// Answers the next request, whatever it is, with a Status of `code`; returns its method
    /// and path.
    pub async fn fail(&mut self, code: u16) -> (String, String) {
        let seen = self.next().await.expect("a request");
        let asked = (seen.method.clone(), seen.path.clone());
        seen.refuse(code, "refused");
        asked
    }

    /// Whether no further request comes.
    pub async fn quiet(&mut self) -> bool {
        self.0.quiet().await
    }
}

pub fn writer(user: &str) -> Subject {
    Subject {
        user: user.to_owned(),
        groups: vec![
            "team-a-editors".to_owned(),
            "system:authenticated".to_owned(),
        ],
        uid: Some(format!("uid-of-{user}")),
        extra: BTreeMap::from([("scopes".to_owned(), vec!["edit".to_owned()])]),
    }
}

pub fn delete_job(name: Option<&str>) -> Request {
    Request {
        verb: "delete",
        group: "batch".to_owned(),
        resource: "jobs".to_owned(),
        namespace: Some("team-a".to_owned()),
        name: name.map(str::to_owned),
    }
}

/// Asks whether `subject` may do `request`, in a task of its own (the test answers for the API
/// server meanwhile).
pub fn ask(
    reviews: &Arc<Reviews>,
    subject: Subject,
    request: Request,
) -> tokio::task::JoinHandle<Result<bool, kube::Error>> {
    let reviews = reviews.clone();
    tokio::spawn(async move { reviews.review(&subject, &request).await })
}

pub fn code(error: &kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected the API server's Status, got {other:?}"),
    }
}
