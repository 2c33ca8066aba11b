//! The readers of a policy spec's fields, one per kind of field: each answers the value read
//! and pushes its error (path, value, rule) beside the others', so [`super::Rules::read`] reports
//! every invalid field at once.

use std::time::Duration;

use serde_json::json;

use crate::annotations::APPROVED_GENERATION;
use crate::api::ResourceRef;
use crate::cel::{Check, Expect, Expression, VARIABLE};
use crate::duration;
use crate::field_error::FieldError;
use crate::limits::LIMIT_RANGE;
use crate::selector::Selector;

pub(super) fn kinds(resources: &[ResourceRef], errors: &mut Vec<FieldError>) -> Vec<ResourceRef> {
    if resources.is_empty() {
        errors.push(FieldError::new(
            "spec.resources",
            &json!([]),
            "names no kind: add one, e.g. {apiVersion: tekton.dev/v1, kind: PipelineRun}",
        ));
    }
    let mut kinds = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let path = format!("spec.resources[{index}]");
        let version = resource.api_version.rsplit('/').next().unwrap_or_default();
        let malformed = resource.api_version.matches('/').count() > 1
            || version.is_empty()
            || resource.api_version.starts_with('/');
        if malformed {
            errors.push(FieldError::new(
                format!("{path}.apiVersion"),
                &json!(resource.api_version),
                crate::schema_rules::API_VERSION_RULE,
            ));
            continue;
        }
        if resource.kind.is_empty() || !resource.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
            errors.push(FieldError::new(
                format!("{path}.kind"),
                &json!(resource.kind),
                crate::schema_rules::KIND_RULE,
            ));
            continue;
        }
        kinds.push(resource.clone());
    }
    kinds
}

pub(super) fn selector(
    path: &str,
    selector: Option<&impl serde::Serialize>,
    errors: &mut Vec<FieldError>,
) -> Selector {
    let Some(value) = selector.and_then(|selector| serde_json::to_value(selector).ok()) else {
        return Selector::default();
    };
    Selector::read(path, &value, errors)
}

pub(super) fn expression(
    path: &str,
    source: Option<&str>,
    expect: Expect,
    check: Check,
    errors: &mut Vec<FieldError>,
) -> Option<Expression> {
    let source = source?;
    Expression::checked(source, expect, &[VARIABLE], check)
        .map_err(|rule| errors.push(FieldError::new(path, &json!(source), rule)))
        .ok()
        .flatten()
}

pub(super) fn ttl(
    path: &str,
    text: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let text = text?;
    duration::parse(text)
        .map_err(|error| errors.push(FieldError::new(path, &json!(text), error)))
        .ok()
}

/// A policy's `retention.dev/approved-generation`, read: the generation approved past its
/// blast-radius guard, a whole number from 1.
pub fn approved_generation(value: &str) -> Result<i64, FieldError> {
    match value.trim().parse::<i64>() {
        Ok(generation) if generation >= 1 => Ok(generation),
        _ => Err(FieldError::new(
            format!("metadata.annotations[{APPROVED_GENERATION}]"),
            &json!(value),
            "is not a generation: use the policy's metadata.generation, e.g. 2 (`kubectl retention approve` writes it)",
        )),
    }
}

pub use crate::schema_bounds::MAX_IMMEDIATE_DELETIONS;

pub(super) fn count(path: &str, value: Option<i64>, errors: &mut Vec<FieldError>) -> Option<u32> {
    let value = value?;
    match u32::try_from(value) {
        Ok(count) if count <= MAX_IMMEDIATE_DELETIONS => Some(count),
        _ => {
            let rule = format!(
                "is not a count: use a whole number from 0 (no guard) to {MAX_IMMEDIATE_DELETIONS}, e.g. 100"
            );
            errors.push(FieldError::new(path, &json!(value), rule));
            None
        }
    }
}

pub(super) fn limit(path: &str, value: Option<i64>, errors: &mut Vec<FieldError>) -> Option<u32> {
    let value = value?;
    let (min, max) = LIMIT_RANGE;
    let allowed = format!("use a whole number from {min} to {max}, e.g. 5");
    let rule = if value > i64::from(max) {
        format!("is above the limit of {max}: {allowed}")
    } else if value < i64::from(min) {
        format!("is below {min}: {allowed}")
    } else {
        return u32::try_from(value).ok();
    };
    errors.push(FieldError::new(path, &json!(value), rule));
    None
}
