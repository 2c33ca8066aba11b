//! HTTP routes: `/validate` and `/mutate` for the API server, `/healthz` and `/readyz` for
//! probes, `/metrics` for Prometheus. Bodies above the configured limit are refused with 413.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
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
        .route("/readyz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(context)
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
