//! AdmissionReview handling: decode, dispatch to validation or mutation, encode the answer.
//! Malformed bodies get an `InvalidRequest` review and HTTP 400, never a panic or a 500.

use std::time::Instant;

use axum::http::StatusCode;
use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::{StatusCause, StatusDetails};
use kube_retention_common::FieldError;
use kube_retention_common::annotations::MANAGED_LABEL;
use kube_retention_common::field_error::listed;
use kube_retention_common::kinds::qualified;
use serde_json::Value;

use crate::Context;
use crate::metrics::AdmissionOutcome;
use crate::{mutate, validate, writers};

/// Which webhook endpoint was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Validate,
    Mutate,
}

/// Answers one AdmissionReview body.
pub async fn handle(
    context: &Context,
    hook: Hook,
    body: &[u8],
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
    let (response, outcome) = match hook {
        Hook::Validate => validate_request(context, &request).await,
        Hook::Mutate => mutate_request(context, &request, whole_seconds(Timestamp::now())).await,
    };
    let operation = format!("{:?}", request.operation).to_uppercase();
    context
        .metrics
        .observe(hook, &request.kind.kind, &operation, outcome, started);
    (StatusCode::OK, response.into_review())
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

async fn validate_request(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
) -> (AdmissionResponse, AdmissionOutcome) {
    let response = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return (response, AdmissionOutcome::Allowed);
    }
    let Some(object) = object_json(request, request.object.as_ref()) else {
        return (
            response.deny("the request carries no object to validate"),
            AdmissionOutcome::Malformed,
        );
    };
    let old = object_json(request, request.old_object.as_ref());
    let errors = validate::new_errors(&context.kinds, &object, old.as_ref());
    if !errors.is_empty() {
        return (
            deny(response, request, &errors, Denial::Invalid),
            AdmissionOutcome::Denied,
        );
    }
    match writers::refusals(context, request, &object, old.as_ref()).await {
        Ok(refusals) if refusals.is_empty() => {}
        Ok(refusals) => {
            return (
                deny(response, request, &refusals, Denial::Forbidden),
                AdmissionOutcome::Forbidden,
            );
        }
        Err(unchecked) => {
            tracing::warn!(error = %unchecked, "refused a write whose writer could not be checked");
            return (
                response.deny(unchecked.to_string()),
                AdmissionOutcome::Unchecked,
            );
        }
    }
    let mut response = response;
    let warnings = if validate::is_policy(&object) {
        let mut warnings = crate::policy_warnings::of(context, &object).await;
        warnings.extend(crate::sink_warnings::of_policy(
            &context.sink_policy,
            &object,
        ));
        warnings
    } else if validate::is_cleaner(&object) {
        crate::sink_warnings::of(&context.sink_policy, &object)
    } else {
        Vec::new()
    };
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    (response, AdmissionOutcome::Allowed)
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
            "retention settings are not yours to make",
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

async fn mutate_request(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    now: Timestamp,
) -> (AdmissionResponse, AdmissionOutcome) {
    let response = AdmissionResponse::from(request);
    let creating = match request.operation {
        Operation::Create => true,
        Operation::Update => false,
        Operation::Delete | Operation::Connect => return (response, AdmissionOutcome::Allowed),
    };
    let Some(object) = object_json(request, request.object.as_ref()) else {
        return (response, AdmissionOutcome::Allowed);
    };
    // Invalid settings are the validating webhook's to deny; mutating them would only confuse.
    if !validate::new_errors(&context.kinds, &object, None).is_empty() {
        return (response, AdmissionOutcome::Allowed);
    }
    let namespace = request.namespace.as_deref();
    let mutated = mutate::mutate(context.lookups(), &object, namespace, creating, now).await;
    let patch = json_patch::diff(&object, &mutated.object);
    let mut response = if patch.0.is_empty() {
        response
    } else {
        match response.with_patch(patch) {
            Ok(patched) => patched,
            Err(error) => {
                tracing::error!(%error, "could not encode a patch");
                return (AdmissionResponse::from(request), AdmissionOutcome::Allowed);
            }
        }
    };
    let mut warnings = mutated.warnings;
    if let Some(warning) = unhandled_warning(context, request, &mutated.object).await {
        warnings.push(warning);
    }
    let outcome = if response.patch.is_some() {
        AdmissionOutcome::Patched
    } else {
        AdmissionOutcome::Allowed
    };
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    (response, outcome)
}

/// A warning for an object with retention settings that kube-retention will not act on: of a
/// cluster-scoped kind, or of a kind the controller may not list, watch, patch and delete.
async fn unhandled_warning(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
) -> Option<String> {
    let managed = object
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(MANAGED_LABEL))
        .is_some();
    let types = &request.kind;
    let api_version = if types.group.is_empty() {
        types.version.clone()
    } else {
        format!("{}/{}", types.group, types.version)
    };
    if !managed || context.kinds.find(&api_version, &types.kind).is_some() {
        return None;
    }
    if request.namespace.is_none() {
        return Some(format!(
            "kube-retention does not delete cluster-scoped objects ({}): these settings have no effect",
            types.kind
        ));
    }
    let resource = &request.resource;
    let named = qualified(&resource.resource, &resource.group);
    match context
        .access
        .missing(&resource.group, &resource.resource)
        .await
    {
        Ok(missing) if missing.is_empty() => None,
        Ok(missing) => Some(format!(
            "kube-retention cannot delete this: grant its controller {} on {named}",
            missing.join(", ")
        )),
        Err(error) => {
            tracing::warn!(%error, resource = %named, "could not check the controller's permissions");
            Some(format!(
                "could not check whether kube-retention may delete {named}: {error}"
            ))
        }
    }
}

/// The API server stores times in whole seconds (an object's creationTimestamp is set just after
/// admission, truncated): computing from the same second keeps later re-computations identical.
fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}
