//! Which setting decided an object's deadline, named where it is written and with its value as
//! written: `retention.dev/ttl-after-finished` `30m`, `spec.retention.ttlAfterSucceeded` `2h`, a
//! RetentionPolicy's `ttlAfterFailed`. The model decides — [`Expiry::decide`] and
//! [`governing::judge`](crate::governing::judge) record a [`Decider`] beside the deadline they compute — and this module
//! only names it, so `kubectl retention explain` says the very setting the controller acts on
//! and the precedence is written once (in [`OwnSettings::ttl_after`] and [`Expiry::decide`]).
//!
//! [`Said`] puts a setting in words.
//!
//! [`OwnSettings::ttl_after`]: crate::own_settings::OwnSettings::ttl_after

use serde_json::Value;

use crate::annotations::{EXPIRES_AT, KEEP, TTL};
use crate::api::PolicyRules;
use crate::expiry::{Decider, Expiry};
use crate::governing::{Judgement, Subject};
use crate::json::{field, metadata_entry};
use crate::kinds::Entry;
use crate::own_settings::{TtlSource, inherited_ttl};
use crate::progress::Outcome;

mod said;

pub use said::{NamedPolicy, Said};

/// A setting that decided, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub origin: Origin,
    /// The value as the object writes it (`30m`, `3600`, `true`, an RFC 3339 time); `None` for a
    /// policy's field, whose text is in the policy's spec ([`PolicyField::written`]).
    pub written: Option<String>,
    /// What the model read from it.
    pub decider: Decider,
}

/// Where a setting is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A `retention.dev/*` annotation of the object.
    Annotation(&'static str),
    /// One of the object's own fields, at this dotted path.
    Field { path: String },
    /// A field holding what a run inherited from its parent (embedded in the run, or a snapshot
    /// of the parent's), at this dotted path; the parent as far as the run names it.
    Inherited {
        path: String,
        parent: Option<Parent>,
    },
    /// A field of the governing policy, by its index among the candidates judged.
    Policy { index: usize, field: PolicyField },
}

/// The parent a run inherited a setting from: its kind, and its name where the run names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub kind: &'static str,
    pub name: Option<String>,
}

/// A RetentionPolicy's (or ClusterRetentionPolicy's) fields that give a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyField {
    Ttl,
    TtlAfterSucceeded,
    TtlAfterFailed,
}

impl PolicyField {
    /// The field behind a [`Decider`] of the settings `governing` makes of a policy: its `ttl`
    /// stands where `retention.dev/ttl` does, its TTLs after an outcome where the object's own
    /// fields do.
    pub(crate) fn behind(decider: Decider) -> Option<Self> {
        match decider {
            Decider::Ttl(_) => Some(Self::Ttl),
            Decider::AfterFinish {
                outcome: Outcome::Succeeded,
                ..
            } => Some(Self::TtlAfterSucceeded),
            Decider::AfterFinish {
                outcome: Outcome::Failed,
                ..
            } => Some(Self::TtlAfterFailed),
            Decider::Keep | Decider::ExpiresAt(_) => None,
        }
    }

    /// Its name under `spec`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ttl => "ttl",
            Self::TtlAfterSucceeded => "ttlAfterSucceeded",
            Self::TtlAfterFailed => "ttlAfterFailed",
        }
    }

    /// Its value as `spec` writes it.
    pub fn written(self, spec: &PolicyRules) -> Option<&str> {
        match self {
            Self::Ttl => spec.ttl.as_deref(),
            Self::TtlAfterSucceeded => spec.ttl_after_succeeded.as_deref(),
            Self::TtlAfterFailed => spec.ttl_after_failed.as_deref(),
        }
    }
}

/// The setting that decided `judgement` of `subject` (as [`governing::judge`](crate::governing::judge) judged it): the
/// object's annotation or field, or the governing policy's field. `None` where nothing gives a
/// deadline ([`Expiry::Never`], [`Expiry::NotYet`]).
pub fn deciding(judgement: &Judgement, subject: &Subject<'_>) -> Option<Setting> {
    let decider = judgement.decider?;
    match judgement.policy {
        Some(index) => Some(Setting {
            origin: Origin::Policy {
                index,
                field: PolicyField::behind(decider)?,
            },
            written: None,
            decider,
        }),
        None => named(decider, subject.entry, subject.object),
    }
}

/// For a run whose own settings govern and give a TTL only once it finishes
/// ([`Expiry::NotYet`]): the setting that will decide after each outcome that has one.
pub fn pending(judgement: &Judgement, subject: &Subject<'_>) -> Vec<(Outcome, Setting)> {
    if judgement.policy.is_some() || judgement.expiry != Expiry::NotYet {
        return Vec::new();
    }
    [Outcome::Succeeded, Outcome::Failed]
        .into_iter()
        .filter_map(|outcome| {
            let (ttl, source) = judgement.own.ttl_after(outcome)?;
            let decider = Decider::AfterFinish {
                outcome,
                source,
                ttl,
            };
            Some((outcome, named(decider, subject.entry, subject.object)?))
        })
        .collect()
}

/// Names a [`Decider`] of the object's own settings ([`crate::OwnSettings::read_as`] of `object` by
/// `entry`).
pub fn named(decider: Decider, entry: &Entry, object: &Value) -> Option<Setting> {
    let annotation = |key: &'static str| Setting {
        origin: Origin::Annotation(key),
        written: metadata_entry(object, "annotations", key).map(str::to_owned),
        decider,
    };
    let (outcome, source) = match decider {
        Decider::Keep => return Some(annotation(KEEP)),
        Decider::ExpiresAt(_) => return Some(annotation(EXPIRES_AT)),
        Decider::Ttl(_) => return Some(annotation(TTL)),
        Decider::AfterFinish {
            outcome, source, ..
        } => (outcome, source),
    };
    let written = |path: &str| {
        field(object, path).map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    };
    let (written, origin) = match source {
        TtlSource::Annotation(key) => return Some(annotation(key)),
        TtlSource::Own => {
            let path = entry.fields.own?.path(outcome);
            (written(&path), Origin::Field { path })
        }
        TtlSource::Inherited => {
            let (_, fields) = inherited_ttl(&entry.fields, object, outcome)?;
            let parent = entry.parent().map(|parent| Parent {
                kind: parent.kind,
                name: parent.name_in(object).map(str::to_owned),
            });
            let path = fields.path(outcome);
            (written(&path), Origin::Inherited { path, parent })
        }
    };
    Some(Setting {
        origin,
        written,
        decider,
    })
}
