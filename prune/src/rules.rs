//! Which objects may be pruned at all: a per-kind "is it finished, and when" rule. The built-in
//! rules are kube-retention's own (`kube_retention_common::progress`): Pods by phase, Jobs by
//! their `Complete`/`Failed` conditions, Shipwright BuildRuns and any Knative-style object by the
//! `Succeeded` condition, OpenShift-style Builds by phase. Callers override or extend them.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use kube_retention_common::kinds::{Registry, group_of};
use kube_retention_common::progress::{FinishRule, Progress};
use serde_json::Value;

/// How one kind says whether (and when) an object finished.
pub type FinishFn = Arc<dyn Fn(&Value) -> Progress + Send + Sync>;

/// The finish rule of each kind, by `Kind.group` (`Job.batch`, `Pod`); kinds without a rule of
/// their own use the fallback — by default the Knative-style `Succeeded` condition, so an
/// object without one is never pruned.
#[derive(Clone)]
pub struct FinishRules {
    by_kind: HashMap<String, FinishFn>,
    fallback: FinishFn,
}

impl fmt::Debug for FinishRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<&String> = self.by_kind.keys().collect();
        kinds.sort();
        write!(f, "FinishRules({kinds:?})")
    }
}

impl Default for FinishRules {
    /// kube-retention's built-in rules.
    fn default() -> Self {
        let mut by_kind: HashMap<String, FinishFn> = HashMap::new();
        for (_, entry) in Registry::builtin().iter() {
            let rule = entry.finish;
            if rule != FinishRule::NotARun {
                by_kind.insert(
                    key(&entry.resource.group, &entry.resource.kind),
                    from_rule(rule),
                );
            }
        }
        Self {
            by_kind,
            fallback: from_rule(FinishRule::SucceededCondition { required: false }),
        }
    }
}

impl FinishRules {
    /// Sets the rule of `kind` in `group` (`""` for the core group), replacing a built-in one.
    pub fn with(
        mut self,
        group: &str,
        kind: &str,
        rule: impl Fn(&Value) -> Progress + Send + Sync + 'static,
    ) -> Self {
        self.by_kind.insert(key(group, kind), Arc::new(rule));
        self
    }

    /// Sets the rule of kinds without one of their own.
    pub fn with_fallback(
        mut self,
        rule: impl Fn(&Value) -> Progress + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Arc::new(rule);
        self
    }

    /// The progress of `object` (with `apiVersion` and `kind`) by its kind's rule.
    pub fn progress(&self, object: &Value) -> Progress {
        let text = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
        let kind = key(group_of(text("apiVersion")), text("kind"));
        self.by_kind.get(&kind).unwrap_or(&self.fallback)(object)
    }
}

fn from_rule(rule: FinishRule) -> FinishFn {
    Arc::new(move |object: &Value| rule.progress(object))
}

fn key(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}
