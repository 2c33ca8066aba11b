//! Reading JSON objects by dotted paths, as every rule of the model does.

use serde_json::Value;

/// Looks up a dotted path (`spec.retention.ttlAfterFailed`) in a JSON object; `null` is absent.
pub fn field<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, key| value.get(key))
        .filter(|value| !value.is_null())
}

/// The string at a dotted path.
pub fn text<'a>(object: &'a Value, path: &str) -> Option<&'a str> {
    field(object, path)?.as_str()
}

/// A label or annotation of the object (`map` is `labels` or `annotations`).
pub fn metadata_entry<'a>(object: &'a Value, map: &str, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get(map)?.get(key)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_dotted_fields_and_treats_null_as_absent() {
        let object = json!({"spec": {"retention": {"ttlAfterFailed": "1h", "failedLimit": null}}});
        assert_eq!(
            field(&object, "spec.retention.ttlAfterFailed"),
            Some(&json!("1h"))
        );
        assert_eq!(field(&object, "spec.retention.failedLimit"), None);
        assert_eq!(field(&object, "spec.nothing.here"), None);
        assert_eq!(text(&object, "spec.retention.ttlAfterFailed"), Some("1h"));
    }

    #[test]
    fn reads_labels_and_annotations_with_dotted_keys() {
        let object = json!({"metadata": {"labels": {"a.b/c": "x"}, "annotations": {"d": 1}}});
        assert_eq!(metadata_entry(&object, "labels", "a.b/c"), Some("x"));
        assert_eq!(metadata_entry(&object, "annotations", "d"), None);
        assert_eq!(metadata_entry(&object, "annotations", "e"), None);
    }
}
