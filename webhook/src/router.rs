//! HTTP routes: `/validate` and `/mutate` for the API server, `/healthz` and `/readyz` for
//! probes, `/metrics` for Prometheus ([`probes`] alone is what `--metrics-address` serves).
//! Each admission has its deadline from its first byte ([`crate::limits`]). Its body arrives
//! into the memory budget ([`crate::body`], [`crate::memory`]): one not arrived by the deadline
//! is cut off (408), one above `--max-body-bytes` refused (413), one cut off to make room for
//! faster ones refused (503). Once whole, the review takes a place among those answered or is
//! refused unjudged (503); its body is decoded ([`crate::review`]) and let go, then its
//! review answered. While draining, `/readyz` answers 503 and every response closes its
//! connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::map_response_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kube::core::admission::AdmissionResponse;

use crate::Context;
use crate::body::{self, Bounds, Unreceived};
use crate::metrics::AdmissionOutcome;
use crate::review::{self, Hook};

/// Kubernetes caps an object at about 1.5 MiB; a review carries up to two of them.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn router(context: Arc<Context>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .merge(probe_routes())
        .layer(map_response_with_state(
            context.clone(),
            close_while_draining,
        ))
        .with_state(Routes {
            context,
            max_body_bytes,
        })
}

/// What the admission routes are given.
#[derive(Clone)]
struct Routes {
    context: Arc<Context>,
    max_body_bytes: usize,
}

impl axum::extract::FromRef<Routes> for Arc<Context> {
    fn from_ref(routes: &Routes) -> Self {
        routes.context.clone()
    }
}

/// `/healthz`, `/readyz` and `/metrics` without the admission routes.
pub fn probes(context: Arc<Context>) -> Router {
    probe_routes().with_state(context)
}

fn probe_routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Context>: axum::extract::FromRef<S>,
{
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
}

fn draining(context: &Context) -> bool {
    context.draining.load(Ordering::Relaxed)
}

async fn ready(State(context): State<Arc<Context>>) -> impl IntoResponse {
    if draining(&context) {
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    } else {
        (StatusCode::OK, "ok")
    }
}

async fn close_while_draining(
    State(context): State<Arc<Context>>,
    mut response: Response,
) -> Response {
    if draining(&context) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn validate(State(routes): State<Routes>, request: Request) -> Response {
    admit(&routes, Hook::Validate, request).await
}

async fn mutate(State(routes): State<Routes>, request: Request) -> Response {
    admit(&routes, Hook::Mutate, request).await
}

/// One admission: its body received by its deadline, a place among those answered, its
/// review decoded (the body let go then) and answered by the deadline.
async fn admit(routes: &Routes, hook: Hook, request: Request) -> Response {
    let context = routes.context.as_ref();
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + context.limits.timeout;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse().ok());
    let bounds = Bounds {
        max: routes.max_body_bytes,
        deadline,
        timeout: humantime::format_duration(context.limits.timeout).to_string(),
    };
    let received = body::receive(request.into_body(), declared, &bounds, &context.memory).await;
    let (body, body_held) = match received {
        Ok(received) => received,
        Err(unreceived) => return unreceived_answer(context, hook, &unreceived, started),
    };
    let Some(_in_flight) = context.limits.enter(&context.metrics) else {
        context
            .metrics
            .observe(hook, "unknown", "unknown", AdmissionOutcome::Shed, started);
        let refusal = format!(
            "kube-retention's webhook is answering {} admissions already \
             (--max-admissions-in-flight): try again",
            context.limits.max_in_flight
        );
        return busy(refusal);
    };
    let mut decoded = context.memory.hold();
    let read = review::read(context, hook, &body, &mut decoded, started);
    drop(body);
    drop(body_held);
    let (status, review) = match read {
        Ok(request) => review::answer(context, hook, &request, deadline, started).await,
        Err(answer) => *answer,
    };
    (status, Json(review)).into_response()
}

/// 503 with `refusal`, asking to try again in a second.
fn busy(refusal: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        refusal,
    )
        .into_response()
}

/// The answer to a body not received whole, counted.
fn unreceived_answer(
    context: &Context,
    hook: Hook,
    unreceived: &Unreceived,
    started: Instant,
) -> Response {
    let (status, outcome) = match unreceived {
        Unreceived::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, AdmissionOutcome::TooLarge),
        Unreceived::TimedOut { .. } => (StatusCode::REQUEST_TIMEOUT, AdmissionOutcome::Timeout),
        Unreceived::CutOff(_) => (StatusCode::SERVICE_UNAVAILABLE, AdmissionOutcome::CutOff),
        Unreceived::Full(_) => (StatusCode::SERVICE_UNAVAILABLE, AdmissionOutcome::Shed),
        Unreceived::Failed(_) => (StatusCode::BAD_REQUEST, AdmissionOutcome::Malformed),
    };
    context
        .metrics
        .observe(hook, "unknown", "unknown", outcome, started);
    let said = AdmissionResponse::invalid(format!("reading the AdmissionReview: {unreceived}"));
    let mut response = (status, Json(said.into_review())).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

async fn metrics(State(context): State<Arc<Context>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        context.metrics.encode(),
    )
}
