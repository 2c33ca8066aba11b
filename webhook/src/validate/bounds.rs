//! The lists of a policy or a Cleaner that multiply admission's work, checked against the CRDs'
//! own bounds ([`kube_retention_common::schema_bounds`]) before anything in them is compiled or
//! asked about: each kind a policy names and each target of a Cleaner costs a discovery lookup
//! and SubjectAccessReviews, each condition a compilation. The API server refuses longer lists
//! by the schema before it calls the webhook; this holds for whatever else reaches it.

use kube_retention_common::FieldError;
use kube_retention_common::schema_bounds::{CONDITIONS, RESOURCES, TARGETS};
use serde_json::Value;

/// The lists of `spec` above their bounds: a policy's `resources`; a Cleaner's `targets` and
/// `conditions`.
pub fn exceeded(spec: &Value, cleaner: bool) -> Vec<FieldError> {
    let lists: &[(&str, u64)] = if cleaner {
        &[("targets", TARGETS), ("conditions", CONDITIONS)]
    } else {
        &[("resources", RESOURCES)]
    };
    lists
        .iter()
        .filter_map(|&(field, bound)| {
            let items = spec.get(field)?.as_array()?.len();
            (items as u64 > bound).then(|| FieldError {
                path: format!("spec.{field}"),
                value: format!("{items} {field}"),
                rule: format!(
                    "are above the limit of {bound} (the CRD's maxItems): name at most {bound}"
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_past_its_bound_is_named_with_its_length_and_the_bound() {
        let many = |count: usize| Value::Array(vec![json!("true"); count]);
        let cleaner = json!({"targets": many(17), "conditions": many(16)});
        let errors: Vec<String> = exceeded(&cleaner, true)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.targets: 17 targets are above the limit of 16 (the CRD's maxItems): name at most 16"
            ]
        );
        let policy = json!({"resources": many(16)});
        assert_eq!(exceeded(&policy, false), []);
        let policy = json!({"resources": many(1000)});
        assert_eq!(exceeded(&policy, false)[0].path, "spec.resources");
    }
}
