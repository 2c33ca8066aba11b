//! AdmissionReview handling: decode, dispatch to validation (`validating.rs`) or mutation
//! (`mutating.rs`) within the request's deadline, encode the answer. Malformed bodies get an
//! `InvalidRequest` review and HTTP 400, never a panic or a 500; a review not answered by its
//! deadline ([`crate::limits`]) gets an explicit answer: a validation is refused (a check that
//! could not finish is no check), a mutation admitted unchanged with a warning (mutation never
//! blocks a write).

use std::time::Instant;

use axum::http::StatusCode;
use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::Value;

use crate::Context;

mod mutating;
mod outcome;
mod validating;

pub use outcome::AdmissionOutcome;

/// Which webhook endpoint was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Validate,
    Mutate,
}

/// Answers one AdmissionReview body within the context's `--admission-timeout` from now.
pub async fn handle(
    context: &Context,
    hook: Hook,
    body: &[u8],
) -> (StatusCode, AdmissionReview<DynamicObject>) {
    let deadline = tokio::time::Instant::now() + context.limits.timeout;
    handle_until(context, hook, body, deadline).await
}

/// Answers one AdmissionReview body, by `deadline` at the latest.
pub async fn handle_until(
    context: &Context,
    hook: Hook,
    body: &[u8],
    deadline: tokio::time::Instant,
) -> (StatusCode, AdmissionReview<DynamicObject>) {
    let started = Instant::now();
    let request = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body)
        .map_err(|error| format!("malformed AdmissionReview: {error}"))
        .and_then(|review| {
            let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
            request.map_err(|_| "AdmissionReview has no request".to_owned())
        });
    let request = match request {
        Ok(request) => request,
        Err(reason) => {
            context.metrics.observe(
                hook,
                "unknown",
                "unknown",
                AdmissionOutcome::Malformed,
                started,
            );
            return (
                StatusCode::BAD_REQUEST,
                AdmissionResponse::invalid(reason).into_review(),
            );
        }
    };
    let answering = async {
        match hook {
            Hook::Validate => validating::answer(context, &request).await,
            Hook::Mutate => {
                mutating::answer(context, &request, whole_seconds(Timestamp::now())).await
            }
        }
    };
    let (response, outcome) = tokio::time::timeout_at(deadline, answering)
        .await
        .unwrap_or_else(|_| timed_out(context, hook, &request));
    let operation = format!("{:?}", request.operation).to_uppercase();
    context
        .metrics
        .observe(hook, &request.kind.kind, &operation, outcome, started);
    (StatusCode::OK, response.into_review())
}

/// The answer to a review not answered by its deadline.
fn timed_out(
    context: &Context,
    hook: Hook,
    request: &AdmissionRequest<DynamicObject>,
) -> (AdmissionResponse, AdmissionOutcome) {
    let limit = humantime::format_duration(context.limits.timeout);
    tracing::warn!(?hook, uid = %request.uid, %limit, "an admission was not answered in time");
    let mut response = AdmissionResponse::from(request);
    match hook {
        Hook::Validate => {
            response = response.deny(format!(
                "kube-retention did not finish checking this write within its limit of {limit} \
                 (--admission-timeout): try again"
            ));
            response.result.code = 504;
            response.result.reason = "Timeout".into();
        }
        Hook::Mutate => {
            response.warnings = Some(vec![format!(
                "kube-retention did not finish mutating this write within its limit of {limit} \
                 (--admission-timeout): admitted unchanged (no TTLs copied, no \
                 retention.dev/expires-at stamped, no retention.dev/managed label)"
            )]);
        }
    }
    (response, AdmissionOutcome::Timeout)
}

/// The request's object as JSON with its apiVersion and kind filled in from the request, so the
/// model recognises its kind even when a client left them out.
fn object_json(
    request: &AdmissionRequest<DynamicObject>,
    object: Option<&DynamicObject>,
) -> Option<Value> {
    let mut value = serde_json::to_value(object?).ok()?;
    let gvk = &request.kind;
    let api_version = if gvk.group.is_empty() {
        gvk.version.clone()
    } else {
        format!("{}/{}", gvk.group, gvk.version)
    };
    let map = value.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(api_version));
    map.insert("kind".into(), Value::String(gvk.kind.clone()));
    Some(value)
}

/// The API server stores times in whole seconds (an object's creationTimestamp is set just after
/// admission, truncated): computing from the same second keeps later re-computations identical.
fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}
