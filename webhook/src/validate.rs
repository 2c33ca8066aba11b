//! Validation: the model's own reader ([`Policy::read`]) is the validator, so what the webhook
//! denies is exactly what the controller would refuse to act on.
//!
//! On UPDATE only errors the change introduces are denied: an object admitted before the webhook
//! was installed must stay updatable (finalizers, labels) even if its old settings are invalid.

use kube_retention_common::{FieldError, Policy, Registry};
use serde_json::Value;

/// The errors to deny `object` for, given the `old` object of an UPDATE. A kind switched off in
/// `kinds` is not kube-retention's to judge.
pub fn new_errors(kinds: &Registry, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let Some(entry) = kinds.entry_for(object) else {
        return Vec::new();
    };
    let (_, errors) = Policy::read_as(entry, object);
    let Some(old) = old else {
        return errors;
    };
    let (_, old_errors) = Policy::read_as(entry, old);
    errors
        .into_iter()
        .filter(|error| !old_errors.contains(error))
        .collect()
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
    fn a_switched_off_kind_is_not_judged() {
        let mut kinds = Registry::builtin().clone();
        kinds
            .remove("Build.shipwright.io")
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(super::new_errors(&kinds, &build("1d", 101), None), []);
    }
}
