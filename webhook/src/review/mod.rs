//! AdmissionReview handling: decode what admission reads of it (`envelope.rs`, by the plans of
//! `reads.rs`, within the budget of `lean.rs`: never the objects whole), dispatch to validation
//! (`validating.rs`) or mutation (`mutating.rs`) within the request's deadline, encode the
//! answer. Malformed bodies get an `InvalidRequest` review and HTTP 400, never a panic or a
//! 500; a review whose decoded parts would pass their budget is answered unjudged
//! (`unjudged`); a review not answered by its
//! deadline ([`crate::limits`]) gets an explicit answer: a validation is refused (a check that
//! could not finish is no check), a mutation admitted unchanged with a warning (mutation never
//! blocks a write).

use std::time::Instant;

use axum::http::StatusCode;
use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};

use crate::Context;

mod envelope;
pub mod lean;
mod mutating;
mod outcome;
pub mod reads;
mod validating;

pub use envelope::{Request, Unread, api_version};
pub use outcome::AdmissionOutcome;

/// Which webhook endpoint was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Validate,
    Mutate,
}

/// An answer: the HTTP status and the review to send.
pub type Answer = (StatusCode, AdmissionReview<DynamicObject>);

/// Answers one AdmissionReview body within the context's `--admission-timeout` from now.
pub async fn handle(context: &Context, hook: Hook, body: &[u8]) -> Answer {
    let deadline = tokio::time::Instant::now() + context.limits.timeout;
    handle_until(context, hook, body, deadline).await
}

/// Answers one AdmissionReview body, by `deadline` at the latest, its decoded parts held in
/// the context's memory ([`crate::memory`]) until answered.
pub async fn handle_until(
    context: &Context,
    hook: Hook,
    body: &[u8],
    deadline: tokio::time::Instant,
) -> Answer {
    let started = Instant::now();
    let mut held = context.memory.hold();
    match read(context, hook, body, &mut held, started) {
        Ok(request) => answer(context, hook, &request, deadline, started).await,
        Err(refused) => *refused,
    }
}

/// Reads one AdmissionReview body, its decoded parts charged to `account`; a body that is no
/// review gets its answer (400), and so does one whose parts did not fit (`unjudged`).
pub fn read(
    context: &Context,
    hook: Hook,
    body: &[u8],
    account: &mut dyn lean::Account,
    started: Instant,
) -> Result<Request, Box<Answer>> {
    let limit = context.limits.decoded_per_review;
    match envelope::read(body, &context.kinds, limit, account) {
        Ok(request) => Ok(request),
        Err(Unread::Malformed(reason)) => {
            context.metrics.observe(
                hook,
                "unknown",
                "unknown",
                AdmissionOutcome::Malformed,
                started,
            );
            Err(Box::new((
                StatusCode::BAD_REQUEST,
                AdmissionResponse::invalid(reason).into_review(),
            )))
        }
        Err(Unread::Exceeded { about, exceeded }) => {
            Err(Box::new(unjudged(context, hook, &about, exceeded, started)))
        }
    }
}

/// Answers a review read, by `deadline` at the latest.
pub async fn answer(
    context: &Context,
    hook: Hook,
    request: &Request,
    deadline: tokio::time::Instant,
    started: Instant,
) -> Answer {
    let now = whole_seconds(Timestamp::now());
    answer_at(context, hook, request, deadline, started, now).await
}

/// As [`answer`], a mutation computing deadlines from `now`.
pub async fn answer_at(
    context: &Context,
    hook: Hook,
    request: &Request,
    deadline: tokio::time::Instant,
    started: Instant,
    now: Timestamp,
) -> Answer {
    let answering = async {
        match hook {
            Hook::Validate => validating::answer(context, request).await,
            Hook::Mutate => mutating::answer(context, request, now).await,
        }
    };
    let (response, outcome) = tokio::time::timeout_at(deadline, answering)
        .await
        .unwrap_or_else(|_| timed_out(context, hook, request));
    let about = &request.about;
    let operation = format!("{:?}", about.operation).to_uppercase();
    context
        .metrics
        .observe(hook, &about.kind.kind, &operation, outcome, started);
    (StatusCode::OK, response.into_review())
}

/// The answer to a review whose decoded parts did not fit: past its own limit, a validation
/// is refused (a check that could not be made is no check) and a mutation admitted unchanged,
/// both saying why; past the memory every admission shares, refused unjudged (503), as a
/// review past `--max-admissions-in-flight` is, and the API server applies the registration's
/// failurePolicy.
fn unjudged(
    context: &Context,
    hook: Hook,
    about: &kube::core::admission::AdmissionRequest<DynamicObject>,
    exceeded: lean::Exceeded,
    started: Instant,
) -> Answer {
    let operation = format!("{:?}", about.operation).to_uppercase();
    let kind = &about.kind.kind;
    let mut response = AdmissionResponse::from(about);
    let (status, outcome) = match exceeded {
        lean::Exceeded::Review { .. } => {
            let said = format!(
                "kube-retention did not judge this write: {exceeded} \
                 (--max-decoded-bytes)"
            );
            match hook {
                Hook::Validate => {
                    response = response.deny(said);
                    response.result.code = 413;
                    response.result.reason = "RequestEntityTooLarge".into();
                }
                Hook::Mutate => response.warnings = Some(vec![said]),
            }
            (StatusCode::OK, AdmissionOutcome::TooLarge)
        }
        lean::Exceeded::Shared { .. } => {
            let said = format!("kube-retention's webhook is busy: {exceeded}: try again");
            response = response.deny(said);
            response.result.code = 503;
            response.result.reason = "ServiceUnavailable".into();
            (StatusCode::SERVICE_UNAVAILABLE, AdmissionOutcome::Shed)
        }
    };
    context
        .metrics
        .observe(hook, kind, &operation, outcome, started);
    (status, response.into_review())
}

/// The answer to a review not answered by its deadline.
fn timed_out(
    context: &Context,
    hook: Hook,
    request: &Request,
) -> (AdmissionResponse, AdmissionOutcome) {
    let limit = humantime::format_duration(context.limits.timeout);
    let uid = &request.about.uid;
    tracing::warn!(?hook, %uid, %limit, "an admission was not answered in time");
    let mut response = AdmissionResponse::from(&request.about);
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

/// The API server stores times in whole seconds (an object's creationTimestamp is set just after
/// admission, truncated): computing from the same second keeps later re-computations identical.
fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}
