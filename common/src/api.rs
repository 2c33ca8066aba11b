//! The `retention.dev/v1alpha1` API: `ClusterRetentionPolicy` (cluster-scoped, with a
//! `namespaceSelector`) and `RetentionPolicy` (applies to its own namespace). These types are
//! the source of the CRDs in deploy/crds (`make crds`); the schema fixes the shape and bounds
//! every string, list and map a tenant writes ([`crate::schema_bounds`]), the rules (durations,
//! limits, CEL) are [`crate::policies`]'s, so admission and the controller report every error
//! together and in the same words.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "retention.dev";
pub const VERSION: &str = "v1alpha1";

/// Finished objects of these kinds, in the namespaces `namespaceSelector` selects, live as long
/// as this policy says.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "retention.dev",
    version = "v1alpha1",
    kind = "ClusterRetentionPolicy",
    doc = "How long finished objects of some kinds live, and how many are kept, in the namespaces its namespaceSelector selects; a RetentionPolicy in a namespace takes precedence.",
    shortname = "crp",
    status = "PolicyStatus",
    category = "retention",
    printcolumn = r#"{"name":"Kinds","type":"string","jsonPath":".status.kinds"}"#,
    printcolumn = r#"{"name":"TTL","type":"string","jsonPath":".spec.ttl","priority":1}"#,
    printcolumn = r#"{"name":"Succeeded","type":"string","jsonPath":".spec.ttlAfterSucceeded"}"#,
    printcolumn = r#"{"name":"Failed","type":"string","jsonPath":".spec.ttlAfterFailed"}"#,
    printcolumn = r#"{"name":"Limits","type":"string","jsonPath":".status.limits"}"#,
    printcolumn = r#"{"name":"Dry-Run","type":"boolean","jsonPath":".spec.dryRun"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema_rules::policy_spec)]
pub struct ClusterRetentionPolicySpec {
    /// The namespaces it applies in (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema_bounds::selector)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub rules: PolicyRules,
}

/// Finished objects of these kinds in this namespace live as long as this policy says; it
/// takes precedence over ClusterRetentionPolicies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "retention.dev",
    version = "v1alpha1",
    kind = "RetentionPolicy",
    doc = "How long finished objects of some kinds live in this namespace, and how many are kept; it takes precedence over ClusterRetentionPolicies.",
    namespaced,
    shortname = "rp",
    status = "PolicyStatus",
    category = "retention",
    printcolumn = r#"{"name":"Kinds","type":"string","jsonPath":".status.kinds"}"#,
    printcolumn = r#"{"name":"TTL","type":"string","jsonPath":".spec.ttl","priority":1}"#,
    printcolumn = r#"{"name":"Succeeded","type":"string","jsonPath":".spec.ttlAfterSucceeded"}"#,
    printcolumn = r#"{"name":"Failed","type":"string","jsonPath":".spec.ttlAfterFailed"}"#,
    printcolumn = r#"{"name":"Limits","type":"string","jsonPath":".status.limits"}"#,
    printcolumn = r#"{"name":"Dry-Run","type":"boolean","jsonPath":".spec.dryRun"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema_rules::policy_spec)]
pub struct RetentionPolicySpec {
    #[serde(flatten)]
    pub rules: PolicyRules,
}

/// What both policy kinds say.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRules {
    /// The kinds it governs, e.g. `{apiVersion: tekton.dev/v1, kind: PipelineRun}`.
    #[schemars(length(min = 1, max = crate::schema_bounds::RESOURCES))]
    pub resources: Vec<ResourceRef>,
    /// Only objects whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema_bounds::selector)]
    pub selector: Option<LabelSelector>,
    /// Only objects for which this CEL expression (over `object`) is true.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::EXPRESSION_BYTES))]
    pub match_expression: Option<String>,
    /// How the kinds say they finished, where kube-retention has no built-in rule (or to
    /// override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<FinishedRules>,
    /// Time to live from creation, finished or not (Go duration, e.g. `720h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub ttl: Option<String>,
    /// Time to live after succeeding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub ttl_after_succeeded: Option<String>,
    /// Time to live after failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub ttl_after_failed: Option<String>,
    /// Succeeded objects kept per group (1 to 100), the newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = crate::schema_rules::LIMIT_MIN, max = crate::schema_rules::LIMIT_MAX))]
    pub succeeded_limit: Option<i64>,
    /// Failed objects kept per group (1 to 100), the newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = crate::schema_rules::LIMIT_MIN, max = crate::schema_rules::LIMIT_MAX))]
    pub failed_limit: Option<i64>,
    /// A label key: limits count per value of it (default: per kind and namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::LABEL_KEY_BYTES), transform = crate::schema_rules::label_key)]
    pub group_by: Option<String>,
    /// Decide and report in the status, delete nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Rails against deleting more than meant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyRules>,
    /// While this CEL expression (over `object`) is true, an object the policy governs is not
    /// deleted, even when due, nor counted against its limits: e.g. until Tekton Results has
    /// archived it, `!has(object.metadata.annotations) ||
    /// !('results.tekton.dev/record' in object.metadata.annotations)`. An expression that cannot
    /// be evaluated on an object holds it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::EXPRESSION_BYTES))]
    pub hold_while: Option<String>,
    /// A Warning Event `RetentionExpiring` on each object it governs this long before its
    /// deadline (Go duration, e.g. `1h`); an object's `retention.dev/notify-before` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::DURATION_BYTES), transform = crate::schema_rules::duration)]
    pub notify_before: Option<String>,
    /// An http(s) URL: each deletion the policy decides is announced to it as a CloudEvent
    /// `dev.retention.deleted` (the deletion ledger), each notice as `dev.retention.expiring`.
    /// The controller's sink policy (`--cloud-event-sink-*`) says where it may connect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::URL_BYTES), transform = crate::schema_rules::url)]
    pub sink: Option<String>,
    /// With `sink`: an object is deleted only once the sink answered 2xx to its
    /// `dev.retention.deleted` event, which then carries the object's final state (its
    /// metadata only above 256 KiB, saying so). While the sink does not, the object waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_before_delete: Option<bool>,
}

/// Rails against deleting more than meant.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SafetyRules {
    /// When the policy is new or its spec changed, and it would delete more objects than this at
    /// once (those already past their new deadline or over their new limit), it deletes nothing
    /// until approved (`kubectl retention approve`). 0 turns the guard off; absent, the
    /// controller's `--max-immediate-deletions` (100 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = crate::schema_bounds::MAX_IMMEDIATE_DELETIONS))]
    pub max_immediate_deletions: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// `group/version`, or `v1` for the core group.
    #[schemars(length(max = crate::schema_bounds::API_VERSION_BYTES), transform = crate::schema_rules::api_version)]
    pub api_version: String,
    /// The kind's name, e.g. `PipelineRun`.
    #[schemars(length(max = crate::schema_bounds::NAME_BYTES), transform = crate::schema_rules::kind)]
    pub kind: String,
}

/// CEL expressions over `object`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishedRules {
    /// True once the object succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::EXPRESSION_BYTES))]
    pub succeeded: Option<String>,
    /// True once the object failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::EXPRESSION_BYTES))]
    pub failed: Option<String>,
    /// When it finished, a timestamp (e.g. `timestamp(object.status.finishedAt)`); the time
    /// kube-retention saw it finish when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = crate::schema_bounds::EXPRESSION_BYTES))]
    pub at: Option<String>,
}

/// What an admin needs at a glance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// `Ready`: whether the controller can act on every kind (else why not).
    #[serde(default)]
    #[schemars(transform = crate::schema_rules::conditions)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The kinds governed, for `kubectl get` (`PipelineRun.tekton.dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<String>,
    /// The limits, for `kubectl get` (`5/3 per tekton.dev/pipeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<String>,
    /// Objects this policy governs now.
    #[serde(default)]
    pub matched: u64,
    /// The next deletion it will cause (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_deletion: Option<String>,
    /// Deletions so far (by this controller's run).
    #[serde(default)]
    pub deletions: u64,
    /// Objects it governs that its `holdWhile` holds now.
    #[serde(default)]
    pub on_hold: u64,
    /// In dry run: objects that would have been deleted, and when (at most 20, oldest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub would_delete: Vec<WouldDelete>,
    /// The generation whose deletions the controller carries out: it passed the blast-radius
    /// guard (`spec.safety.maxImmediateDeletions`) or was approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_generation: Option<i64>,
    /// While it awaits approval: deletions held back, and when each fell due (at most 20,
    /// oldest first; the `Ready` condition counts them all, per kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<WouldDelete>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WouldDelete {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// When (RFC 3339).
    pub at: String,
    /// `ttl` or `limit`.
    pub reason: String,
}
