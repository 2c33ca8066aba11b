//! A mocked API server (tower-test) for `access::Reviews`, in the style of controller-rs's
//! `ApiServerVerifier`: the test takes each request the client sends, checks it, and answers it.
//! Shared by the access tests (`access_reviews`, `access_served`).

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a subset

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::{Response, StatusCode};
use kube::Client;
use kube::client::Body;
use kube_retention_webhook::access::{Request, Reviews, Subject};
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

pub const CONTROLLER: &str = "system:serviceaccount:kube-retention:kube-retention-controller";
pub const REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

pub struct ApiServer {
    handle: Handle<http::Request<Body>, Response<Body>>,
}

/// A request the API server saw (its query string left out: none of these requests has
/// parameters, so it must be empty), and the means to answer it.
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: Value,
    pub respond: SendResponse<Response<Body>>,
}

pub fn start(time_to_live: Duration) -> (ApiServer, Arc<Reviews>) {
    let (service, handle) = mock::pair::<http::Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let reviews = Reviews::caching_for(client, CONTROLLER, time_to_live);
    (ApiServer { handle }, Arc::new(reviews))
}

impl ApiServer {
    /// The next request; `None` if none comes within an hour.
    pub async fn next(&mut self) -> Option<Seen> {
        let next = self.handle.next_request();
        let (request, respond) = tokio::time::timeout(Duration::from_secs(3600), next)
            .await
            .ok()??;
        let method = request.method().to_string();
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default();
        assert!(query.is_empty(), "{method} {path}?{query}");
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Some(Seen {
            method,
            path,
            body,
            respond,
        })
    }

    /// Answers the next request, which must be a SubjectAccessReview, with `allowed`; returns
    /// the review's spec.
    pub async fn review(&mut self, allowed: bool) -> Value {
        let seen = self.next().await.expect("a SubjectAccessReview");
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            ("POST", REVIEWS)
        );
        assert_eq!(seen.body["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(seen.body["kind"], "SubjectAccessReview");
        let spec = seen.body["spec"].clone();
        let answer = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                            "metadata": {}, "spec": spec, "status": {"allowed": allowed}});
        seen.respond.send_response(ok(answer));
        spec
    }

    /// Answers the next request, whatever it is, with a Status of `code`; returns its method
    /// and path.
    pub async fn fail(&mut self, code: u16) -> (String, String) {
        let seen = self.next().await.expect("a request");
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": "refused", "code": code});
        let response = Response::builder()
            .status(StatusCode::from_u16(code).unwrap())
            .body(Body::from(serde_json::to_vec(&status).unwrap()))
            .unwrap();
        seen.respond.send_response(response);
        (seen.method, seen.path)
    }

    /// Whether no further request comes within an hour.
    pub async fn quiet(&mut self) -> bool {
        self.next().await.is_none()
    }
}

pub fn ok(body: Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
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
