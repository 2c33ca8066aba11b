//! The controller's HTTP endpoints, on `--metrics-address`: `/healthz`, `/readyz` (200 once
//! every kind is listed) and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;

use crate::metrics::Metrics;

/// `/healthz`, `/readyz` (200 once every kind is listed) and `/metrics`.
pub(super) fn http_routes(metrics: Metrics, ready: Arc<AtomicBool>) -> Router {
    let served_metrics = metrics;
    let listed = ready;
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = listed.load(Ordering::Relaxed);
                async move {
                    if ready {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "listing")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let metrics = served_metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.encode(),
                    )
                }
            }),
        )
}
