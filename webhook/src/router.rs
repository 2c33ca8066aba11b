//! HTTP routes: `/validate` and `/mutate` for the API server, `/healthz` and `/readyz` for
//! probes, `/metrics` for Prometheus. Bodies above the configured limit are refused with 413.
//! While draining, `/readyz` answers 503 and every response closes its connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::map_response_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::Context;
use crate::review::{Hook, handle};

/// Kubernetes caps an object at about 1.5 MiB; a review carries up to two of them.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn router(context: Arc<Context>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(map_response_with_state(
            context.clone(),
            close_while_draining,
        ))
        .with_state(context)
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

async fn validate(State(context): State<Arc<Context>>, body: Bytes) -> impl IntoResponse {
    let (status, review) = handle(&context, Hook::Validate, &body).await;
    (status, Json(review))
}

async fn mutate(State(context): State<Arc<Context>>, body: Bytes) -> impl IntoResponse {
    let (status, review) = handle(&context, Hook::Mutate, &body).await;
    (status, Json(review))
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
