//! A mocked Kubernetes API server for unit tests, in the style of kube-rs controller-rs's
//! `ApiServerVerifier`: [`pair`] gives a kube [`Client`] and the server side of it (tower-test's
//! mock pair); the test takes each request the client sends ([`ApiServer::next`]), reads it
//! ([`Received`]: method, path, query, content type, JSON body) and answers it
//! ([`Received::reply`], [`Received::refuse`] with the Status the API server would give), or
//! leaves it unanswered. One crate for the controller's and the webhook's tests, so each scenario
//! says only its own sequence of calls and every refusal carries the reason kube reads
//! (`get_opt` knows a missing object by `NotFound`).

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

/// How long [`ApiServer::next`] waits: on a paused runtime an hour of virtual time passes at
/// once when nothing else is due, so "no request within an hour" means "none will come".
pub const QUIET: Duration = Duration::from_secs(3600);

/// A kube client and the API server it talks to.
pub fn pair() -> (Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), ApiServer { handle })
}

/// The server side: each request the client sends, in order.
pub struct ApiServer {
    handle: Handle<Request<Body>, Response<Body>>,
}

/// A request the API server received, and the means to answer it.
pub struct Received {
    pub method: String,
    pub path: String,
    /// The query string, empty for none.
    pub query: String,
    pub content_type: String,
    /// The `Accept` header, empty for none: a metadata-only request asks for
    /// `as=PartialObjectMetadata`.
    pub accept: String,
    /// The body as JSON; `Null` for none (or a body that is not JSON).
    pub body: Value,
    respond: SendResponse<Response<Body>>,
}

impl ApiServer {
    /// The next request; `None` when the client is gone or none comes within [`QUIET`].
    pub async fn next(&mut self) -> Option<Received> {
        self.next_within(QUIET).await
    }

    /// The next request; `None` when the client is gone or none comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Received> {
        let (request, respond) = tokio::time::timeout(wait, self.handle.next_request())
            .await
            .ok()??;
        let method = request.method().to_string();
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let (content_type, accept) = {
            let header = |name| {
                request
                    .headers()
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            };
            (
                header(http::header::CONTENT_TYPE),
                header(http::header::ACCEPT),
            )
        };
        let bytes = request.into_body().collect_bytes().await.ok()?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Some(Received {
            method,
            path,
            query,
            content_type,
            accept,
            body,
            respond,
        })
    }

    /// Whether no further request comes within [`QUIET`].
    pub async fn quiet(&mut self) -> bool {
        self.next().await.is_none()
    }
}

impl Received {
    /// `METHOD path` (and `?query` where there is one), for asserting a sequence of calls.
    pub fn line(&self) -> String {
        match self.query.as_str() {
            "" => format!("{} {}", self.method, self.path),
            query => format!("{} {}?{query}", self.method, self.path),
        }
    }

    /// Answers with `code` and `body`.
    pub fn reply(self, code: u16, body: &Value) {
        self.reply_raw(code, serde_json::to_vec(body).unwrap_or_default());
    }

    /// Answers with `code` and a body as it is: a watch's stream of events, one JSON object a
    /// line, which ends with the body (the watcher then watches again).
    pub fn reply_raw(self, code: u16, body: Vec<u8>) {
        let mut response = Response::new(Body::from(body));
        *response.status_mut() =
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.respond.send_response(response);
    }

    /// Answers with the Status the API server gives for `code`, saying `message`.
    pub fn refuse(self, code: u16, message: &str) {
        self.reply(code, &status(code, message));
    }

    /// Fails the request without an answer, as a broken connection does.
    pub fn break_off(self, error: &str) {
        self.respond.send_error(error.to_owned());
    }

    /// Leaves the request unanswered for as long as the returned sender lives.
    pub fn unanswered(self) -> SendResponse<Response<Body>> {
        self.respond
    }
}

/// The Status the API server answers `code` with: `Success` for 2xx, otherwise `Failure` with
/// the reason it gives for that code, which kube's clients read.
pub fn status(code: u16, message: &str) -> Value {
    let reason = match code {
        200..=299 => "",
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let outcome = if (200..300).contains(&code) {
        "Success"
    } else {
        "Failure"
    };
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": outcome,
           "message": message, "reason": reason, "code": code})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_is_received_read_and_answered() {
        let (client, mut server) = pair();
        let asked = tokio::spawn(async move {
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::all(client);
            api.list(&Default::default())
                .await
                .map(|list| list.items.len())
        });
        let received = server.next().await.unwrap_or_else(|| panic!("a request"));
        assert_eq!(received.line(), "GET /api/v1/configmaps");
        received.reply(
            200,
            &json!({"kind": "List", "apiVersion": "v1", "metadata": {},
                                    "items": []}),
        );
        assert!(matches!(asked.await, Ok(Ok(0))));
        assert!(server.quiet().await);
    }

    #[test]
    fn a_refusal_carries_the_reason_kube_reads() {
        assert_eq!(status(404, "gone")["reason"], "NotFound");
        assert_eq!(status(409, "changed")["status"], "Failure");
        assert_eq!(status(200, "")["status"], "Success");
    }
}
