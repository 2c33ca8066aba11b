//! Validation: the model's own readers are the validators — [`OwnSettings::read`] for objects,
//! [`Rules::read`] for RetentionPolicies — so what the webhook denies is exactly what the
//! controller would refuse to act on.
//!
//! On UPDATE only errors the change introduces are denied: an object admitted before the webhook
//! was installed must stay updatable (finalizers, labels) even if its old settings are invalid.
//!
//! A policy's or a Cleaner's expressions are compiled, or only bounded ([`Check`]): admission
//! bounds them first on its async worker and compiles them off it ([`crate::compilations`]);
//! [`bounds`] checks the lists that multiply its work before either.

use kube_retention_common::annotations::APPROVED_GENERATION;
use kube_retention_common::api::{GROUP, PolicyRules};
use kube_retention_common::cel::Check;
use kube_retention_common::kinds::group_of;
use kube_retention_common::policies::{Rules, approved_generation};
use kube_retention_common::{FieldError, OwnSettings, Registry, cleaner};
use serde::Deserialize;
use serde_json::Value;

pub mod bounds;

/// The kinds whose spec is a policy.
const POLICY_KINDS: [&str; 2] = ["RetentionPolicy", "ClusterRetentionPolicy"];
const CLEANER: &str = "Cleaner";

/// The errors to deny `object` for, given the `old` object of an UPDATE. A kind switched off in
/// `kinds` is not kube-retention's to judge. A policy is judged whole, every time.
pub fn new_errors(kinds: &Registry, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    new_errors_checking(kinds, object, old, Check::Compile)
}

/// As [`new_errors`], a policy's or a Cleaner's expressions compiled or only bounded as `check`
/// says.
pub fn new_errors_checking(
    kinds: &Registry,
    object: &Value,
    old: Option<&Value>,
    check: Check,
) -> Vec<FieldError> {
    if let Some(errors) = ours_errors(object, check) {
        return errors;
    }
    let Some(entry) = kinds.entry_for(object) else {
        return Vec::new();
    };
    let (_, errors) = OwnSettings::read_as(entry, object);
    let Some(old) = old else {
        return errors;
    };
    let (_, old_errors) = OwnSettings::read_as(entry, old);
    errors
        .into_iter()
        .filter(|error| !old_errors.contains(error))
        .collect()
}

/// The errors of a policy or a Cleaner (`None` for any other object), its expressions compiled
/// or only bounded as `check` says.
pub fn ours_errors(object: &Value, check: Check) -> Option<Vec<FieldError>> {
    if is_policy(object) {
        return Some(policy_errors(object, check));
    }
    is_cleaner(object).then(|| {
        let mut errors =
            cleaner::errors_checking(object.get("spec").unwrap_or(&Value::Null), check);
        errors.extend(approval_errors(object, "Cleaner"));
        errors
    })
}

pub fn is_policy(object: &Value) -> bool {
    is_ours(object, &POLICY_KINDS)
}

pub fn is_cleaner(object: &Value) -> bool {
    is_ours(object, &[CLEANER])
}

/// Whether `object` is of one of `kinds` of the `retention.dev` group.
fn is_ours(object: &Value, kinds: &[&str]) -> bool {
    let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
    group_of(text("apiVersion")) == GROUP && kinds.contains(&text("kind"))
}

/// Every error of a RetentionPolicy or ClusterRetentionPolicy: its spec (its expressions
/// compiled or bounded as `check` says), and the generation its approval names.
pub fn policy_errors(object: &Value, check: Check) -> Vec<FieldError> {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    // Read from the object in place: a policy's spec is the largest part admission keeps.
    let mut errors = match PolicyRules::deserialize(spec) {
        Ok(rules) => Rules::read_checking(&rules, spec.get("namespaceSelector"), check).1,
        Err(error) => vec![FieldError::new(
            "spec",
            spec,
            format!("is malformed: {error}"),
        )],
    };
    errors.extend(approval_errors(object, "policy"));
    errors
}

/// The errors of the generation an object's approval names (`retention.dev/approved-generation`,
/// a policy's or a Cleaner's, `what` it is): a generation, and one already made.
fn approval_errors(object: &Value, what: &str) -> Vec<FieldError> {
    let Some(approval) = object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(APPROVED_GENERATION))
    else {
        return Vec::new();
    };
    let text = approval.as_str().unwrap_or_default();
    let current = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    match (approved_generation(text), current) {
        (Err(error), _) => vec![error],
        // An approval is of a generation already made, never of a later spec change.
        (Ok(generation), Some(current)) if generation > current => vec![FieldError::new(
            format!("metadata.annotations[{APPROVED_GENERATION}]"),
            approval,
            format!(
                "names a generation the {what} has not reached (it is at {current}): approve \
                 the generation it is at, after reading what it would delete (`kubectl \
                 retention approve` does)"
            ),
        )],
        (Ok(_), _) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_errors(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        super::new_errors(Registry::builtin(), object, old)
    }

    fn build(ttl: &str, limit: u32) -> Value {
        json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
               "spec": {"retention": {"ttlAfterFailed": ttl, "succeededLimit": limit}}})
    }

    #[test]
    fn denies_every_invalid_field_on_create() {
        let errors = new_errors(&build("1d", 101), None);
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn on_update_denies_only_what_the_change_introduced() {
        let old = build("1d", 5);
        assert_eq!(new_errors(&build("1d", 5), Some(&old)), []);
        let errors = new_errors(&build("1d", 101), Some(&old));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "spec.retention.succeededLimit");
        assert_eq!(new_errors(&build("2d", 5), Some(&old)).len(), 1);
    }

    #[test]
    fn valid_objects_pass() {
        assert_eq!(new_errors(&build("36h", 100), None), []);
    }

    #[test]
    fn policies_are_judged_by_the_policy_reader() {
        let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                     "ttlAfterFailed": "1d", "failedLimit": 0}});
        let errors = new_errors(&policy, None);
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(paths, ["spec.ttlAfterFailed", "spec.failedLimit"]);
        let malformed = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                               "spec": {"resources": "Job"}});
        assert_eq!(new_errors(&malformed, None)[0].path, "spec");
    }

    #[test]
    fn an_approval_names_a_generation_and_its_safety_a_count() {
        let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                            "metadata": {"annotations": {"retention.dev/approved-generation": "latest"}},
                            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                     "ttl": "24h", "safety": {"maxImmediateDeletions": -1}}});
        let errors: Vec<String> = new_errors(&policy, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "spec.safety.maxImmediateDeletions: -1 is not a count: use a whole number from 0"
            ),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("metadata.annotations[retention.dev/approved-generation]: \"latest\" is not a generation"),
            "{errors:?}"
        );
    }

    #[test]
    fn an_approval_of_a_generation_not_yet_made_is_refused() {
        let policy = |approved: &str| {
            json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                   "metadata": {"generation": 3,
                                "annotations": {"retention.dev/approved-generation": approved}},
                   "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttl": "24h"}})
        };
        assert_eq!(new_errors(&policy("3"), None), []);
        assert_eq!(
            new_errors(&policy("2"), None),
            [],
            "an older one approves nothing new"
        );
        let errors: Vec<String> = new_errors(&policy("4"), None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "metadata.annotations[retention.dev/approved-generation]: \"4\" names a generation \
              the policy has not reached (it is at 3): approve the generation it is at, after \
              reading what it would delete (`kubectl retention approve` does)"
            ]
        );
    }

    #[test]
    fn a_switched_off_kind_is_not_judged() {
        let mut kinds = Registry::builtin().clone();
        kinds
            .remove("Build.shipwright.io")
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(super::new_errors(&kinds, &build("1d", 101), None), []);
    }
}
