//! The rules of the `retention.dev` CRDs that the API server can check itself: patterns, ranges
//! and `x-kubernetes-validations`, so that with the webhook down or bypassed (a restore from a
//! backup, a GitOps replay during an outage) an invalid policy or Cleaner is still refused, not
//! stored for the controller to report. Each states a rule of [`crate::policies`] or
//! [`crate::cleaner`] in the schema's terms, and `common/tests/testsuite/schema_rules.rs` holds
//! each pattern to the Rust check it restates, on generated input. What a schema cannot say
//! stays the webhook's: CEL expressions, durations past Go's 292 years, the kinds the cluster
//! serves and who may delete them.
//!
//! The sizes of what a tenant writes are [`crate::schema_bounds`]'s.

use schemars::Schema;
use serde_json::{Value, json};

use crate::limits::LIMIT_RANGE;

/// Edits `schema` as JSON.
pub(crate) fn edit(schema: &mut Schema, change: impl FnOnce(&mut Value)) {
    let mut value = std::mem::take(schema).to_value();
    change(&mut value);
    *schema = Schema::try_from(value).unwrap_or_default();
}

macro_rules! duration_component {
    () => {
        r"([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)"
    };
}

/// One number and its unit (`1.5h`), of a duration: `ms` before `m`, so a search finds each
/// whole.
pub const DURATION_COMPONENT_PATTERN: &str = duration_component!();

/// Go's `time.ParseDuration` grammar ([`crate::duration`]): `0`, or numbers with units (`ns`,
/// `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), with an optional sign.
pub const DURATION_PATTERN: &str = concat!(r"^[-+]?(0|(", duration_component!(), r")+)$");

/// The one negative duration a time to live may be: zero.
pub const NEGATIVE_ZERO_PATTERN: &str = r"^-(0|((0+(\.0*)?|\.0+)(ns|us|µs|μs|ms|s|m|h))+)$";

/// A label key ([`crate::selector::check_label_key`]): an optional DNS-subdomain prefix and a
/// slash, then a name of at most 63 characters; the prefix at most 253 (counted apart: a
/// pattern cannot).
pub const LABEL_KEY_PATTERN: &str = concat!(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?",
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
);

/// A resource's `apiVersion`: `group/version`, or `version` for the core group.
pub const API_VERSION_PATTERN: &str = r"^([^/]+/)?[^/]+$";
/// What an `apiVersion` must be, as every check says it.
pub const API_VERSION_RULE: &str =
    "is not GROUP/VERSION (or VERSION for the core group), e.g. tekton.dev/v1";

/// A kind's name.
pub const KIND_PATTERN: &str = r"^[A-Za-z0-9]+$";
/// What a kind must be, as every check says it.
pub const KIND_RULE: &str = "is not a kind name, e.g. PipelineRun";

/// A sink's URL ([`crate::sink_policy::url_error`]).
pub const URL_PATTERN: &str = r"^https?://";
/// What a sink must be, as every check says it.
pub const URL_RULE: &str = "is not an http(s) URL, e.g. http://cleanup-sink.example/";

/// A Cleaner target's name: a CEL identifier (the rule on a target's name, in `cleaner/schema.rs`,
/// also refuses the reserved words).
pub const IDENTIFIER_PATTERN: &str = r"^[A-Za-z_][A-Za-z0-9_]*$";

/// A policy that sets nothing to delete by, in the webhook's words.
pub const DELETES_NOTHING: &str = "sets no ttl, ttlAfterSucceeded, ttlAfterFailed, succeededLimit or failedLimit: it would delete nothing";

/// `archiveBeforeDelete` without a sink, in the webhook's words.
pub const ARCHIVE_NEEDS_SINK: &str =
    "needs spec.sink: the sink that must acknowledge each object before it is deleted";

/// A Cleaner reference naming one object and selecting others, in the webhook's words.
pub const NAME_AND_LABELS: &str =
    "has both name and matchLabels: one object by name, or those the labels select";

/// Succeeded or failed objects kept per group.
pub const LIMIT_MIN: i64 = LIMIT_RANGE.0 as i64;
pub const LIMIT_MAX: i64 = LIMIT_RANGE.1 as i64;

/// Appends a CEL rule to a schema's `x-kubernetes-validations`. The API server's denial names
/// the field (or `fieldPath`) and the value, then `message`, the webhook's words for the rule:
/// `spec.ttl: Invalid value: "1d": is not a duration: …`.
pub(crate) fn validate(schema: &mut Value, rule: &str, message: &str, field_path: Option<&str>) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let mut validation = json!({"rule": rule, "message": message});
    if let Some(field_path) = field_path {
        validation["fieldPath"] = json!(field_path);
    }
    let rules = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    if let Some(rules) = rules.as_array_mut() {
        rules.push(validation);
    }
}

/// A CEL `matches` of one of the patterns above (a raw string: they hold backslashes).
pub(crate) fn matches(variable: &str, pattern: &str) -> String {
    format!("{variable}.matches(r'{pattern}')")
}

/// A duration field: Go's grammar, and not below zero, each refused in the parser's words.
pub fn duration(schema: &mut Schema) {
    use crate::duration::DurationError;
    edit(schema, |schema| {
        let syntax = DurationError::Syntax.to_string();
        validate(schema, &matches("self", DURATION_PATTERN), &syntax, None);
        let rule = format!(
            "!self.startsWith('-') || {}",
            matches("self", NEGATIVE_ZERO_PATTERN)
        );
        validate(schema, &rule, &DurationError::Negative.to_string(), None);
    });
}

/// A resource's `apiVersion` field.
pub fn api_version(schema: &mut Schema) {
    edit(schema, |schema| {
        validate(
            schema,
            &matches("self", API_VERSION_PATTERN),
            API_VERSION_RULE,
            None,
        );
    });
}

/// A kind field.
pub fn kind(schema: &mut Schema) {
    edit(schema, |schema| {
        validate(schema, &matches("self", KIND_PATTERN), KIND_RULE, None);
    });
}

/// A sink's URL field.
pub fn url(schema: &mut Schema) {
    edit(schema, |schema| {
        validate(schema, &matches("self", URL_PATTERN), URL_RULE, None);
    });
}

/// The rule over a label key in `variable`.
fn label_key_rule(variable: &str) -> String {
    format!(
        "{} && {variable}.indexOf('/') <= 253",
        matches(variable, LABEL_KEY_PATTERN)
    )
}

/// A policy's spec: it deletes by something, and archives only to a sink.
pub fn policy_spec(schema: &mut Schema) {
    edit(schema, |schema| {
        let fields = [
            "ttl",
            "ttlAfterSucceeded",
            "ttlAfterFailed",
            "succeededLimit",
            "failedLimit",
        ];
        let deletes = fields
            .iter()
            .map(|field| format!("has(self.{field})"))
            .collect::<Vec<_>>()
            .join(" || ");
        validate(schema, &deletes, DELETES_NOTHING, None);
        validate(
            schema,
            "!has(self.archiveBeforeDelete) || !self.archiveBeforeDelete || has(self.sink)",
            ARCHIVE_NEEDS_SINK,
            Some(".archiveBeforeDelete"),
        );
    });
}

/// A label key field.
pub fn label_key(schema: &mut Schema) {
    edit(schema, label_key_value);
}

fn label_key_value(schema: &mut Value) {
    let rule = crate::selector::LABEL_KEY_RULE;
    validate(schema, &label_key_rule("self"), rule, None);
}

/// A Cleaner's targets: a list keyed by name, so the API server refuses two of one name.
pub fn targets(schema: &mut Schema) {
    edit(schema, |schema| list_map(schema, "name"));
}

/// A list whose items `key` identifies (`x-kubernetes-list-type: map`).
fn list_map(schema: &mut Value, key: &str) {
    if let Some(object) = schema.as_object_mut() {
        object.insert("x-kubernetes-list-type".to_owned(), json!("map"));
        object.insert("x-kubernetes-list-map-keys".to_owned(), json!([key]));
    }
}

/// A Cleaner reference: one object by name, or those the labels select.
pub fn reference(schema: &mut Schema) {
    edit(schema, |schema| {
        validate(
            schema,
            "!(has(self.name) && has(self.matchLabels))",
            NAME_AND_LABELS,
            None,
        );
    });
}

/// Status conditions: a list keyed by type, as Kubernetes' own conditions are.
pub fn conditions(schema: &mut Schema) {
    edit(schema, |schema| list_map(schema, "type"));
}

/// A label selector ([`crate::selector::Selector::read`]): label keys, the four operators, and
/// values exactly where the operator needs them.
pub(crate) fn selector_value(schema: &mut Value) {
    if let Some(labels) = schema.pointer_mut("/properties/matchLabels") {
        let rule = format!("self.all(key, {})", label_key_rule("key"));
        validate(labels, &rule, crate::selector::LABEL_KEY_RULE, None);
    }
    let Some(item) = schema.pointer_mut("/properties/matchExpressions/items") else {
        return;
    };
    if let Some(key) = item.pointer_mut("/properties/key") {
        label_key_value(key);
    }
    if let Some(operator) = item
        .pointer_mut("/properties/operator")
        .and_then(Value::as_object_mut)
    {
        operator.insert("enum".to_owned(), json!(crate::selector::OPERATORS));
    }
    validate(
        item,
        "self.operator in ['Exists', 'DoesNotExist'] || (has(self.values) && size(self.values) > 0)",
        crate::selector::VALUES_NEEDED,
        Some(".values"),
    );
    validate(
        item,
        "self.operator in ['In', 'NotIn'] || !has(self.values) || size(self.values) == 0",
        crate::selector::VALUES_UNWANTED,
        Some(".values"),
    );
}
