//! The bounds the `retention.dev` CRDs' schema puts on everything a namespace editor writes,
//! so that the API server refuses an oversized policy or Cleaner itself, with the webhook down
//! or bypassed (a restore from a backup, a GitOps replay during an outage), before the
//! controller or the webhook spends anything on it. Each is generous for what a retention rule
//! needs and small next to what it would cost unbounded; docs/explanation/tenancy.md ("What a
//! namespace editor can and cannot make the controller do") lists them.

use schemars::Schema;
use serde_json::{Value, json};

use crate::schema_rules::edit;

/// An expression (`match`, `finished.*`, `holdWhile`, a Cleaner's condition): the CEL
/// evaluator's own bound, [`crate::cel::MAX_SOURCE_BYTES`].
pub const EXPRESSION_BYTES: u64 = crate::cel::MAX_SOURCE_BYTES as u64;
/// The kinds a policy names.
pub const RESOURCES: u64 = 16;
/// A kind, an API group, a version, a name: Kubernetes' own bound on a DNS subdomain.
pub const NAME_BYTES: u64 = 253;
/// An apiVersion: a group, a slash, a version.
pub const API_VERSION_BYTES: u64 = 317;
/// A duration (`720h`, `1h30m`).
pub const DURATION_BYTES: u64 = 64;
/// A sink's URL.
pub const URL_BYTES: u64 = 2_048;
/// A label key (`groupBy`): a 253-byte prefix, a slash and a 63-byte name.
pub const LABEL_KEY_BYTES: u64 = 317;
/// A label value.
pub const LABEL_VALUE_BYTES: u64 = 63;
/// The labels a selector names (`matchLabels`).
pub const SELECTOR_LABELS: u64 = 32;
/// The expressions of a selector (`matchExpressions`), and the values of one.
pub const SELECTOR_EXPRESSIONS: u64 = 16;
pub const SELECTOR_VALUES: u64 = 64;
/// A Cleaner's targets and conditions.
pub const TARGETS: u64 = 16;
pub const CONDITIONS: u64 = 16;
/// The largest `spec.safety.maxImmediateDeletions`.
pub const MAX_IMMEDIATE_DELETIONS: u32 = 1_000_000;

/// Sets `key` to `value` on the schema of `field` inside an object schema, if it has one.
fn set(schema: &mut Value, field: &str, key: &str, value: Value) {
    if let Some(field) = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut(field))
        .and_then(Value::as_object_mut)
    {
        field.insert(key.to_owned(), value);
    }
}

/// A label selector's bounds: its labels, its expressions and their values.
pub fn selector(schema: &mut Schema) {
    edit(schema, selector_value);
}

fn selector_value(schema: &mut Value) {
    set(
        schema,
        "matchLabels",
        "maxProperties",
        json!(SELECTOR_LABELS),
    );
    if let Some(labels) = schema
        .pointer_mut("/properties/matchLabels/additionalProperties")
        .and_then(Value::as_object_mut)
    {
        labels.insert("maxLength".to_owned(), json!(LABEL_VALUE_BYTES));
    }
    set(
        schema,
        "matchExpressions",
        "maxItems",
        json!(SELECTOR_EXPRESSIONS),
    );
    if let Some(item) = schema.pointer_mut("/properties/matchExpressions/items") {
        set(item, "key", "maxLength", json!(LABEL_KEY_BYTES));
        set(item, "operator", "maxLength", json!(16));
        set(item, "values", "maxItems", json!(SELECTOR_VALUES));
        if let Some(values) = item
            .pointer_mut("/properties/values/items")
            .and_then(Value::as_object_mut)
        {
            values.insert("maxLength".to_owned(), json!(LABEL_VALUE_BYTES));
        }
    }
    crate::schema_rules::selector_value(schema);
}

/// A map of labels (a Cleaner reference's `matchLabels`).
pub fn labels(schema: &mut Schema) {
    edit(schema, labels_value);
}

fn labels_value(schema: &mut Value) {
    if let Some(object) = schema.as_object_mut() {
        object.insert("maxProperties".to_owned(), json!(SELECTOR_LABELS));
    }
    if let Some(values) = schema
        .get_mut("additionalProperties")
        .and_then(Value::as_object_mut)
    {
        values.insert("maxLength".to_owned(), json!(LABEL_VALUE_BYTES));
    }
}

/// A list of expressions: each at most [`EXPRESSION_BYTES`].
pub fn expressions(schema: &mut Schema) {
    edit(schema, |schema| {
        if let Some(items) = schema.get_mut("items").and_then(Value::as_object_mut) {
            items.insert("maxLength".to_owned(), json!(EXPRESSION_BYTES));
        }
    });
}
