//! HTTP routes: `/validate` and `/mutate` for the API server, `/healthz` and `/readyz` for
//! probes, `/metrics` for Prometheus ([`probes`] alone is what `--metrics-address` serves).
//! Each admission takes a place among those in flight or is refused unread (503), and has its
//! deadline from its first byte ([`crate::limits`]): a body that has not arrived by then is cut
//! off (408). Bodies above the configured limit are refused with 413. While draining, `/readyz`
//! answers 503 and every response closes its connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::map_response_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kube::core::admission::AdmissionResponse;

use crate::Context;
use crate::metrics::AdmissionOutcome;
use crate::review::{Hook, handle_until};

/// Kubernetes caps an object at about 1.5 MiB; a review carries up to two of them.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn router(context: Arc<Context>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .merge(probe_routes())
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(map_response_with_state(
            context.clone(),
            close_while_draining,
        ))
        .with_state(context)
}

/// `/healthz`, `/readyz` and `/metrics` without the admission routes.
pub fn probes(context: Arc<Context>) -> Router {
    probe_routes().with_state(context)
}

fn probe_routes() -> Router<Arc<Context>> {
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

async fn validate(State(context): State<Arc<Context>>, request: Request) -> Response {
    admit(&context, Hook::Validate, request).await
}

async fn mutate(State(context): State<Arc<Context>>, request: Request) -> Response {
    admit(&context, Hook::Mutate, request).await
}

/// One admission: a place in flight, its body read and its review answered by its deadline.
async fn admit(context: &Context, hook: Hook, request: Request) -> Response {
    let started = Instant::now();
    let Some(_in_flight) = context.limits.enter(&context.metrics) else {
        let outcome = AdmissionOutcome::Shed;
        context
            .metrics
            .observe(hook, "unknown", "unknown", outcome, started);
        let refusal = format!(
            "kube-retention's webhook is answering {} admissions already \
             (--max-admissions-in-flight): try again",
            context.limits.max_in_flight
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            refusal,
        )
            .into_response();
    };
    let deadline = tokio::time::Instant::now() + context.limits.timeout;
    let body = match tokio::time::timeout_at(deadline, Bytes::from_request(request, &())).await {
        Ok(Ok(body)) => body,
        Ok(Err(rejection)) => return rejection.into_response(),
        Err(_) => {
            let outcome = AdmissionOutcome::Timeout;
            context
                .metrics
                .observe(hook, "unknown", "unknown", outcome, started);
            let limit = humantime::format_duration(context.limits.timeout);
            let cut = AdmissionResponse::invalid(format!(
                "reading the AdmissionReview: its body did not arrive within {limit} \
                 (--admission-timeout)"
            ));
            return (StatusCode::REQUEST_TIMEOUT, Json(cut.into_review())).into_response();
        }
    };
    let (status, review) = handle_until(context, hook, &body, deadline).await;
    (status, Json(review)).into_response()
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
