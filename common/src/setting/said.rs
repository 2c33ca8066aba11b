//! A deciding [`Setting`] in words, as the user wrote it — what `kubectl retention explain`
//! shows: `annotation retention.dev/ttl-after-finished: 30m`, `spec.retention.ttlAfterSucceeded:
//! 2h`, `status.buildSpec.retention.ttlAfterFailed: 10m (from Build hello)`,
//! `RetentionPolicy team-a/jobs: ttlAfterFailed 2h`. Field by field too, for JSON and YAML.

use std::fmt;

use serde::Serialize;

use super::{Origin, Setting};
use crate::api::PolicyRules;
use crate::duration;
use crate::expiry::Decider;

/// A policy as the caller names it (`RetentionPolicy team-a/jobs`), with its spec as written.
pub type NamedPolicy<'a> = (&'a str, &'a PolicyRules);

/// A setting said field by field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Said {
    /// `annotation`, `field`, `inherited` or `policy`.
    pub kind: &'static str,
    /// The annotation key, the field's dotted path, or the policy's field.
    pub name: String,
    /// Its value as written.
    pub value: String,
    /// The policy, or the parent an inherited value comes from (`Build hello`).
    pub from: Option<String>,
}

impl Setting {
    /// Says this setting; `policy` names the candidate policy at an index, for a policy's field.
    pub fn said<'a>(&self, policy: impl FnOnce(usize) -> Option<NamedPolicy<'a>>) -> Said {
        let value = |written: Option<&str>| {
            written.map_or_else(|| what_it_says(self.decider), str::to_owned)
        };
        let (kind, name, from) = match &self.origin {
            Origin::Annotation(key) => ("annotation", (*key).to_owned(), None),
            Origin::Field { path } => ("field", path.clone(), None),
            Origin::Inherited { path, parent } => {
                let from = parent.as_ref().map(|parent| match &parent.name {
                    Some(name) => format!("{} {name}", parent.kind),
                    None => format!("its {}", parent.kind),
                });
                ("inherited", path.clone(), from)
            }
            Origin::Policy { index, field } => {
                let named = policy(*index);
                return Said {
                    kind: "policy",
                    name: field.name().to_owned(),
                    value: value(named.and_then(|(_, spec)| field.written(spec))),
                    from: named.map(|(name, _)| name.to_owned()),
                };
            }
        };
        Said {
            kind,
            name,
            value: value(self.written.as_deref()),
            from,
        }
    }
}

/// What a setting said, where its text is not at hand.
fn what_it_says(decider: Decider) -> String {
    match decider {
        Decider::Keep => "true".to_owned(),
        Decider::ExpiresAt(at) => at.to_string(),
        Decider::Ttl(ttl) | Decider::AfterFinish { ttl, .. } => duration::format(ttl),
    }
}

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            kind,
            name,
            value,
            from,
        } = self;
        match (*kind, from) {
            ("annotation", _) => write!(f, "annotation {name}: {value}"),
            ("policy", Some(policy)) => write!(f, "{policy}: {name} {value}"),
            ("inherited", Some(parent)) => write!(f, "{name}: {value} (from {parent})"),
            _ => write!(f, "{name}: {value}"),
        }
    }
}
