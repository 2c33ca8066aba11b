//! The validating hook's answer, cheapest work first. Any object: its settings read by the
//! model, then the writer check ([`crate::writers`]). A policy or a Cleaner, whose expressions
//! cost CPU to compile: the lists that multiply the work checked against their bounds
//! ([`validate::bounds`]) and everything but compilation read on the async worker; then, when
//! that found nothing, the writer check (SubjectAccessReviews), so a writer who may not make it
//! has nothing compiled; then the expressions compiled off the async workers
//! ([`crate::compilations`]). Where the first pass finds errors, the expressions are compiled
//! too and the denial names every error, nobody asked (a lack of permission is denied only once
//! the settings are valid, as for every object).

use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use super::Request;
use kube::core::response::{StatusCause, StatusDetails};
use kube_retention_common::FieldError;
use kube_retention_common::cel::Check;
use kube_retention_common::field_error::listed;
use serde_json::Value;

use super::AdmissionOutcome;
use crate::compilations::Refused;
use crate::validate::{self, bounds};
use crate::{Context, writers};

pub(super) async fn answer(
    context: &Context,
    review: &Request,
) -> (AdmissionResponse, AdmissionOutcome) {
    let request = &review.about;
    let response = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return (response, AdmissionOutcome::Allowed);
    }
    let Some(object) = &review.object else {
        return (
            response.deny("the request carries no object to validate"),
            AdmissionOutcome::Malformed,
        );
    };
    let old = review.old_object.as_ref();
    let policy = validate::is_policy(object);
    let cleaner = validate::is_cleaner(object);
    let checked = if policy || cleaner {
        checked_ours(context, request, object, old, cleaner).await
    } else {
        checked_object(context, request, object, old).await
    };
    if let Err(refusal) = checked {
        return refusal.answer(response, request);
    }
    let mut response = response;
    let warnings = if policy {
        let mut warnings = crate::policy_warnings::of(context, object).await;
        warnings.extend(crate::sink_warnings::of_policy(
            &context.sink_policy,
            object,
        ));
        warnings
    } else if cleaner {
        crate::sink_warnings::of(&context.sink_policy, object)
    } else {
        Vec::new()
    };
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    (response, AdmissionOutcome::Allowed)
}

/// Why a write is refused.
enum Refusal {
    /// Settings that are wrong.
    Invalid(Vec<FieldError>),
    /// A writer who may not make them.
    Forbidden(Vec<FieldError>),
    /// The check could not be made: the operation that failed and why.
    Unchecked(String),
    /// The expressions were not compiled: their namespace has used its share of the time.
    Throttled { message: String, retry_after: u64 },
}

impl Refusal {
    fn answer(
        self,
        response: AdmissionResponse,
        request: &AdmissionRequest<DynamicObject>,
    ) -> (AdmissionResponse, AdmissionOutcome) {
        match self {
            Self::Invalid(errors) => (
                deny(response, request, &errors, Denial::Invalid),
                AdmissionOutcome::Denied,
            ),
            Self::Forbidden(refusals) => (
                deny(response, request, &refusals, Denial::Forbidden),
                AdmissionOutcome::Forbidden,
            ),
            Self::Unchecked(reason) => (response.deny(reason), AdmissionOutcome::Unchecked),
            Self::Throttled {
                message,
                retry_after,
            } => {
                let mut response = response.deny(message);
                response.result.code = 429;
                response.result.reason = "TooManyRequests".into();
                response.result.details = Some(StatusDetails {
                    name: request.name.clone(),
                    group: request.kind.group.clone(),
                    kind: request.kind.kind.clone(),
                    uid: String::new(),
                    causes: Vec::new(),
                    retry_after_seconds: u32::try_from(retry_after).unwrap_or(u32::MAX),
                });
                (response, AdmissionOutcome::Throttled)
            }
        }
    }
}

/// An object of any other kind: its settings, then its writer.
async fn checked_object(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), Refusal> {
    let errors = validate::new_errors(&context.kinds, object, old);
    if !errors.is_empty() {
        return Err(Refusal::Invalid(errors));
    }
    writer_check(context, request, object, old).await
}

/// A policy or a Cleaner: bounds and everything cheap, its writer, then its expressions
/// compiled.
async fn checked_ours(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
    cleaner: bool,
) -> Result<(), Refusal> {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let mut exceeded = bounds::exceeded(spec, cleaner);
    let cheap = validate::ours_errors(object, Check::Shape).unwrap_or_default();
    if !exceeded.is_empty() {
        exceeded.extend(cheap);
        return Err(Refusal::Invalid(exceeded));
    }
    if cheap.is_empty() {
        writer_check(context, request, object, old).await?;
    }
    let owned = object.clone();
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let compiled = context
        .compilations
        .run(namespace, move || {
            validate::ours_errors(&owned, Check::Compile).unwrap_or_default()
        })
        .await
        .map_err(|refused| match refused {
            Refused::Throttled { retry_after, .. } => Refusal::Throttled {
                message: refused.to_string(),
                retry_after: retry_after.as_secs(),
            },
            Refused::Failed(_) => {
                Refusal::Unchecked(format!("kube-retention could not check this: {refused}"))
            }
        })?;
    if compiled.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(compiled))
    }
}

async fn writer_check(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), Refusal> {
    match writers::refusals(context, request, object, old).await {
        Ok(refusals) if refusals.is_empty() => Ok(()),
        Ok(refusals) => Err(Refusal::Forbidden(refusals)),
        Err(unchecked) => {
            tracing::warn!(error = %unchecked, "refused a write whose writer could not be checked");
            Err(Refusal::Unchecked(unchecked.to_string()))
        }
    }
}

/// Why a write is denied: settings that are wrong, or a writer who may not make them.
#[derive(Debug, Clone, Copy)]
enum Denial {
    Invalid,
    Forbidden,
}

/// A denial that reads well in `kubectl apply` and lists each field as a cause.
fn deny(
    mut response: AdmissionResponse,
    request: &AdmissionRequest<DynamicObject>,
    errors: &[FieldError],
    denial: Denial,
) -> AdmissionResponse {
    let (code, reason, cause, heading) = match denial {
        Denial::Invalid => (
            422,
            "Invalid",
            "FieldValueInvalid",
            "retention settings are invalid",
        ),
        Denial::Forbidden => (
            403,
            "Forbidden",
            "FieldValueForbidden",
            kube_retention_common::tightening::NOT_YOURS,
        ),
    };
    response = response.deny(listed(errors, heading));
    response.result.code = code;
    response.result.reason = reason.into();
    response.result.details = Some(StatusDetails {
        name: request.name.clone(),
        group: request.kind.group.clone(),
        kind: request.kind.kind.clone(),
        causes: errors
            .iter()
            .map(|error| StatusCause {
                reason: cause.into(),
                message: format!("{} {}", error.value, error.rule),
                field: error.path.clone(),
            })
            .collect(),
        uid: String::new(),
        retry_after_seconds: 0,
    });
    response
}
