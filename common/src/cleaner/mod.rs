//! The `Cleaner` (`retention.dev/v1alpha1`, namespaced): a group of resources — some named, some
//! selected by labels, a Helm release — deleted together once `ttl` has passed and CEL
//! `conditions` over the group hold. This module owns its API type (the source of its CRD) and
//! the rules admission checks, all errors at once: Go durations, target names that are CEL
//! identifiers and unique, references with a name or labels but not both, conditions that
//! compile over the targets' variables and `time`, a sink that is an http(s) URL; and what of a
//! Helm release a Cleaner may delete ([`helm`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cel::{Check, Expect, Expression};
use crate::duration;
use crate::field_error::FieldError;

pub mod helm;
mod judge;
mod schema;

pub use judge::{DEFAULT_PERIOD, ERROR_RETRY, Judge, Judging, SEARCH_RESOLUTION, Verdict};

/// The variable bound to the time of an evaluation.
pub const TIME: &str = "time";

/// The type of the CloudEvent sent for a cleaned group.
pub const EVENT_TYPE: &str = "dev.retention.cleaner.deleted";

/// Deletes its targets (and a Helm release) together once `ttl` has passed and every condition
/// holds, then tells `cloudEventSink` and deletes itself.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "retention.dev",
    version = "v1alpha1",
    kind = "Cleaner",
    doc = "Deletes its targets (and a Helm release) together once its ttl has passed and every condition holds, tells its cloudEventSink, then deletes itself.",
    namespaced,
    shortname = "cln",
    status = "CleanerStatus",
    category = "retention",
    printcolumn = r#"{"name":"TTL","type":"string","jsonPath":".spec.ttl"}"#,
    printcolumn = r#"{"name":"Next","type":"date","jsonPath":".status.nextScheduledEvaluation"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CleanerSpec {
    /// A Go duration from the Cleaner's creation; nothing is evaluated before it has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmRelease>,
    #[serde(default)]
    #[schemars(length(max = crate::schema_bounds::TARGETS), transform = crate::schema_rules::targets)]
    pub targets: Vec<Target>,
    /// Where the CloudEvent announcing the clean-up is sent (an http(s) URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::URL_BYTES), transform = crate::schema_rules::url)]
    pub cloud_event_sink: Option<String>,
    /// CEL conditions over the targets (by name, `{items: [...]}`) and `time`; all must hold.
    #[serde(default)]
    #[schemars(length(max = crate::schema_bounds::CONDITIONS), transform = crate::schema_bounds::expressions)]
    pub conditions: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Re-evaluate at least this often (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub period: Option<String>,
    /// The conditions only ever turn from false to true as time passes.
    #[serde(default)]
    pub monotonic: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelmRelease {
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES))]
    pub release: String,
    /// Uninstall the release with the targets.
    #[serde(default)]
    pub delete: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The CEL variable holding `{items: [...]}`: letters, digits and `_`, unique among the
    /// targets.
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES), transform = schema::target_name)]
    pub name: String,
    pub reference: Reference,
    #[serde(default)]
    pub include_when_evaluating: bool,
    #[serde(default)]
    pub delete: bool,
}

/// Objects of one kind in the Cleaner's namespace: one by `name`, or those `matchLabels` selects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema_rules::reference)]
pub struct Reference {
    #[serde(default)]
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES))]
    pub api_group: String,
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES))]
    pub version: String,
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES))]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema_bounds::labels)]
    pub match_labels: Option<BTreeMap<String, String>>,
}

/// The most targets a Cleaner's status names: a clean may resolve tens of thousands, and a
/// status naming each would pass what the API server stores of an object (1.5 MiB).
pub const RESOLVED_NAMED: usize = 100;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanerStatus {
    /// The targets the last evaluation resolved, as `name.plural.group/version`, sorted: the
    /// first 100 (`resolvedTargetCount` says how many in all).
    #[serde(default)]
    #[schemars(length(max = RESOLVED_NAMED))]
    pub resolved_targets: Vec<String>,
    /// How many targets the last evaluation resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_target_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_scheduled_evaluation: Option<String>,
    #[serde(default)]
    #[schemars(transform = crate::schema_rules::conditions)]
    pub conditions: Vec<Condition>,
}

impl CleanerSpec {
    /// The names of the targets the conditions see.
    pub fn evaluated_names(&self) -> Vec<&str> {
        self.targets
            .iter()
            .filter(|target| target.include_when_evaluating)
            .map(|target| target.name.as_str())
            .collect()
    }
}

/// CEL's reserved words, which no target may be named.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A target's name that is not an identifier the conditions can use, in every checker's words.
pub const TARGET_NAME_RULE: &str = "is not a CEL identifier: use letters, digits and _, not \
                                    starting with a digit, not a reserved word nor `time`, e.g. revisions";

/// The names no target may take: CEL's reserved words and [`TIME`].
pub fn reserved_names() -> impl Iterator<Item = &'static str> {
    RESERVED.into_iter().chain([TIME])
}

/// Every error of a Cleaner's spec (JSON, as admission receives it), with its field path.
pub fn errors(spec: &Value) -> Vec<FieldError> {
    errors_checking(spec, Check::Compile)
}

/// As [`errors`], its conditions compiled or only bounded as `check` says.
pub fn errors_checking(spec: &Value, check: Check) -> Vec<FieldError> {
    checked(spec, check).0
}

/// Every error of `spec`, its conditions compiled or only bounded as `check` says, and the
/// conditions compiled ([`Check::Compile`]): a Cleaner is compiled once, for both.
pub(crate) fn checked(spec: &Value, check: Check) -> (Vec<FieldError>, Vec<Expression>) {
    let parsed: CleanerSpec = match serde_json::from_value(spec.clone()) {
        Ok(parsed) => parsed,
        Err(error) => {
            let malformed = FieldError::new("spec", spec, format!("is malformed: {error}"));
            return (vec![malformed], Vec::new());
        }
    };
    let mut errors = Vec::new();
    let mut check_duration = |path: &str, text: &Option<String>| {
        if let Some(text) = text
            && let Err(error) = duration::parse(text)
        {
            errors.push(FieldError::new(path, &Value::String(text.clone()), error));
        }
    };
    check_duration("spec.ttl", &parsed.ttl);
    check_duration(
        "spec.retry.period",
        &parsed.retry.as_ref().and_then(|retry| retry.period.clone()),
    );
    let mut names = BTreeSet::new();
    for (index, target) in parsed.targets.iter().enumerate() {
        let at = |field: &str| format!("spec.targets[{index}].{field}");
        let name = Value::String(target.name.clone());
        if !is_identifier(&target.name) {
            errors.push(FieldError::new(at("name"), &name, TARGET_NAME_RULE));
        } else if !names.insert(target.name.as_str()) {
            errors.push(FieldError::new(
                at("name"),
                &name,
                "names another target too: names must be unique",
            ));
        }
        let reference = &target.reference;
        if reference.name.is_some() && reference.match_labels.is_some() {
            let value = serde_json::to_value(reference).unwrap_or(Value::Null);
            let rule = crate::schema_rules::NAME_AND_LABELS;
            errors.push(FieldError::new(at("reference"), &value, rule));
        }
    }
    if let Some(sink) = &parsed.cloud_event_sink {
        errors.extend(crate::sink_policy::url_error("spec.cloudEventSink", sink));
    }
    let mut declared = parsed.evaluated_names();
    declared.push(TIME);
    let mut compiled = Vec::new();
    for (index, condition) in parsed.conditions.iter().enumerate() {
        match Expression::checked(condition, Expect::Condition, &declared, check) {
            Ok(expression) => compiled.extend(expression),
            Err(error) => {
                let path = format!("spec.conditions[{index}]");
                errors.push(FieldError::new(
                    path,
                    &Value::String(condition.clone()),
                    error,
                ));
            }
        }
    }
    (errors, compiled)
}

/// A CEL identifier that is neither reserved nor `time`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|rest| rest.is_ascii_alphanumeric() || rest == '_')
        && !reserved_names().any(|reserved| reserved == name)
}
