//! Validation: the model's own reader ([`Policy::read`]) is the validator, so what the webhook
//! denies is exactly what the controller would refuse to act on.
//!
//! On UPDATE only errors the change introduces are denied: an object admitted before the webhook
//! was installed must stay updatable (finalizers, labels) even if its old settings are invalid.

use kube_retention_common::{FieldError, Policy};
use serde_json::Value;

/// The errors to deny `object` for, given the `old` object of an UPDATE.
pub fn new_errors(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (_, errors) = Policy::read(object);
    let Some(old) = old else {
        return errors;
    };
    let (_, old_errors) = Policy::read(old);
    errors
        .into_iter()
        .filter(|error| !old_errors.contains(error))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
