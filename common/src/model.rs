//! An object as the model reads it: the one JSON form that every rule, CEL expression and
//! explanation sees, so the controller and `kubectl retention explain` judge the same object.
//! It carries its apiVersion and kind (list items of built-in kinds carry neither) and leaves
//! out `metadata.managedFields`, which the controller's watches do not decode
//! (io/src/lean.rs): an expression reading them would see them in one place and not
//! in the other.

use kube::api::DynamicObject;
use serde_json::Value;

use crate::kinds::Resource;

/// `object` of `resource` as the model reads it (see the module).
pub fn object_value(resource: &Resource, object: &DynamicObject) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(resource.api_version()));
    map.insert("kind".into(), Value::String(resource.kind.clone()));
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use serde_json::json;

    use super::object_value;
    use crate::Registry;

    #[test]
    fn an_object_has_its_type_and_no_managed_fields() {
        let kinds = Registry::builtin();
        let jobs = kinds.named("Job.batch").unwrap();
        let object: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "n",
                         "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "status": {"succeeded": 1}}))
        .unwrap();
        let value = object_value(&kinds[jobs].resource, &object).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "a", "namespace": "n"}, "status": {"succeeded": 1}})
        );
    }
}
