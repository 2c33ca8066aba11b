//! RetentionPolicy and ClusterRetentionPolicy specs, read and checked: every invalid field
//! reported at once, with its path under `spec`, its value and the rule — the webhook denies with
//! these errors, and the controller reports them in the policy's `Ready` condition. The result,
//! a [`Rules`], is what the controller applies.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{PolicyRules, ResourceRef};
use crate::cel::{Check, Expect, Expression, Reads};
use crate::field_error::FieldError;
use crate::kinds::group_of;
use crate::own_settings::Ttls;
use crate::selector::Selector;

mod candidates;
mod fields;

pub use candidates::{PolicyKey, PolicyObject, PolicyScope, RulesSource, candidates};
pub use fields::{MAX_IMMEDIATE_DELETIONS, approved_generation};
use fields::{count, expression, kinds, limit, selector, ttl};

/// A checked policy.
#[derive(Debug, Default)]
pub struct Rules {
    pub kinds: Vec<ResourceRef>,
    pub selector: Selector,
    pub namespace_selector: Selector,
    pub matches: Option<Expression>,
    pub finished: Finished,
    /// From creation, finished or not.
    pub ttl: Option<Duration>,
    pub ttls: Ttls,
    pub succeeded_limit: Option<u32>,
    pub failed_limit: Option<u32>,
    pub group_by: Option<String>,
    pub dry_run: bool,
    /// The blast-radius guard's threshold, where the policy sets one (0: no guard).
    pub max_immediate_deletions: Option<u32>,
    /// While true for an object (or not answerable), the object is not deleted.
    pub hold_while: Option<Expression>,
    /// Warn this long before an object's deadline.
    pub notify_before: Option<Duration>,
    /// Where its deletions and notices are announced (`spec.sink`).
    pub sink: Option<std::sync::Arc<str>>,
    /// Announce each deletion to `sink`, and have it acknowledged, before the DELETE.
    pub archive_before_delete: bool,
}

/// A policy's own finish rules, tried before the kind's built-in one.
#[derive(Debug, Default)]
pub struct Finished {
    pub succeeded: Option<Expression>,
    pub failed: Option<Expression>,
    pub at: Option<Expression>,
}

impl Rules {
    /// Reads a policy's spec; `namespace_selector` is a ClusterRetentionPolicy's.
    pub fn read(spec: &PolicyRules, namespace_selector: Option<&Value>) -> (Self, Vec<FieldError>) {
        Self::read_checking(spec, namespace_selector, Check::Compile)
    }

    /// As [`Rules::read`], its expressions compiled or only bounded as `check` says (bounded
    /// only, the rules have none).
    pub fn read_checking(
        spec: &PolicyRules,
        namespace_selector: Option<&Value>,
        check: Check,
    ) -> (Self, Vec<FieldError>) {
        let mut errors = Vec::new();
        let mut rules = Rules {
            kinds: kinds(&spec.resources, &mut errors),
            selector: selector("spec.selector", spec.selector.as_ref(), &mut errors),
            namespace_selector: namespace_selector
                .map(|value| Selector::read("spec.namespaceSelector", value, &mut errors))
                .unwrap_or_default(),
            matches: expression(
                "spec.match",
                spec.match_expression.as_deref(),
                Expect::Condition,
                check,
                &mut errors,
            ),
            ttl: ttl("spec.ttl", spec.ttl.as_deref(), &mut errors),
            ttls: Ttls {
                after_succeeded: ttl(
                    "spec.ttlAfterSucceeded",
                    spec.ttl_after_succeeded.as_deref(),
                    &mut errors,
                ),
                after_failed: ttl(
                    "spec.ttlAfterFailed",
                    spec.ttl_after_failed.as_deref(),
                    &mut errors,
                ),
            },
            succeeded_limit: limit("spec.succeededLimit", spec.succeeded_limit, &mut errors),
            failed_limit: limit("spec.failedLimit", spec.failed_limit, &mut errors),
            group_by: spec.group_by.clone(),
            dry_run: spec.dry_run.unwrap_or(false),
            hold_while: expression(
                "spec.holdWhile",
                spec.hold_while.as_deref(),
                Expect::Condition,
                check,
                &mut errors,
            ),
            notify_before: ttl(
                "spec.notifyBefore",
                spec.notify_before.as_deref(),
                &mut errors,
            ),
            sink: spec.sink.as_deref().and_then(|sink| {
                match crate::sink_policy::url_error("spec.sink", sink) {
                    Some(error) => {
                        errors.push(error);
                        None
                    }
                    None => Some(sink.into()),
                }
            }),
            archive_before_delete: spec.archive_before_delete.unwrap_or(false),
            max_immediate_deletions: spec.safety.as_ref().and_then(|safety| {
                let path = "spec.safety.maxImmediateDeletions";
                count(path, safety.max_immediate_deletions, &mut errors)
            }),
            ..Rules::default()
        };
        if let Some(finished) = &spec.finished {
            rules.finished = Finished {
                succeeded: expression(
                    "spec.finished.succeeded",
                    finished.succeeded.as_deref(),
                    Expect::Condition,
                    check,
                    &mut errors,
                ),
                failed: expression(
                    "spec.finished.failed",
                    finished.failed.as_deref(),
                    Expect::Condition,
                    check,
                    &mut errors,
                ),
                at: expression(
                    "spec.finished.at",
                    finished.at.as_deref(),
                    Expect::Time,
                    check,
                    &mut errors,
                ),
            };
        }
        if rules.archive_before_delete && spec.sink.is_none() {
            errors.push(FieldError::new(
                "spec.archiveBeforeDelete",
                &json!(true),
                crate::schema_rules::ARCHIVE_NEEDS_SINK,
            ));
        }
        if let Some(key) = &spec.group_by
            && let Err(rule) = crate::selector::check_label_key(key)
        {
            errors.push(FieldError::new("spec.groupBy", &json!(key), rule));
        }
        let deletes = spec.ttl.is_some()
            || spec.ttl_after_succeeded.is_some()
            || spec.ttl_after_failed.is_some()
            || spec.succeeded_limit.is_some()
            || spec.failed_limit.is_some();
        if !deletes {
            errors.push(FieldError::new(
                "spec",
                &json!("{}"),
                crate::schema_rules::DELETES_NOTHING,
            ));
        }
        (rules, errors)
    }

    /// Whether it has CEL expressions (`match`, `finished`, `holdWhile`) to evaluate on each
    /// object.
    pub fn has_expressions(&self) -> bool {
        let finished = &self.finished;
        self.matches.is_some()
            || self.hold_while.is_some()
            || finished.succeeded.is_some()
            || finished.failed.is_some()
            || finished.at.is_some()
    }

    /// What of an object its expressions read, together ([`Reads`]).
    pub fn reads(&self) -> Reads {
        let finished = &self.finished;
        let mut reads = Reads::default();
        for expression in [
            &self.matches,
            &self.hold_while,
            &finished.succeeded,
            &finished.failed,
            &finished.at,
        ]
        .into_iter()
        .flatten()
        {
            reads.union(expression.reads());
        }
        reads
    }

    /// Whether it governs objects of `api_version`/`kind` (any version of the group).
    pub fn governs(&self, api_version: &str, kind: &str) -> bool {
        self.kinds.iter().any(|resource| {
            resource.kind == kind && group_of(&resource.api_version) == group_of(api_version)
        })
    }
}
