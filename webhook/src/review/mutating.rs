//! The mutating hook's answer: the model's mutation ([`crate::mutate`]) as a JSON patch, and a
//! warning where kube-retention will not act on the settings (a cluster-scoped object, a kind
//! its controller may not delete). Invalid settings are the validating hook's to deny; a policy's
//! or a Cleaner's expressions are only bounded here, never compiled.

use jiff::Timestamp;
use kube::core::admission::{AdmissionResponse, Operation};
use kube_retention_common::annotations::MANAGED_LABEL;
use kube_retention_common::cel::Check;
use kube_retention_common::kinds::qualified;
use serde_json::Value;

use super::{AdmissionOutcome, Request, api_version};
use crate::{Context, mutate, validate};

pub(super) async fn answer(
    context: &Context,
    request: &Request,
    now: Timestamp,
) -> (AdmissionResponse, AdmissionOutcome) {
    let about = &request.about;
    let response = AdmissionResponse::from(about);
    let creating = match about.operation {
        Operation::Create => true,
        Operation::Update => false,
        Operation::Delete | Operation::Connect => return (response, AdmissionOutcome::Allowed),
    };
    let Some(object) = &request.object else {
        return (response, AdmissionOutcome::Allowed);
    };
    // Invalid settings are the validating webhook's to deny; mutating them would only confuse.
    if !validate::new_errors_checking(&context.kinds, object, None, Check::Shape).is_empty() {
        return (response, AdmissionOutcome::Allowed);
    }
    let namespace = about.namespace.as_deref();
    let mutated = mutate::mutate(context.lookups(), object, namespace, creating, now).await;
    let patch = json_patch::diff(object, &mutated.object);
    let mut response = if patch.0.is_empty() {
        response
    } else {
        match response.with_patch(patch) {
            Ok(patched) => patched,
            Err(error) => {
                tracing::error!(%error, "could not encode a patch");
                return (AdmissionResponse::from(about), AdmissionOutcome::Allowed);
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
async fn unhandled_warning(context: &Context, request: &Request, object: &Value) -> Option<String> {
    let request = &request.about;
    let managed = object
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(MANAGED_LABEL))
        .is_some();
    let types = &request.kind;
    if !managed
        || context
            .kinds
            .find(&api_version(types), &types.kind)
            .is_some()
    {
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
