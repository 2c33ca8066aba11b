//! An object's own retention settings ([`OwnSettings`]; a RetentionPolicy's are in
//! [`crate::policies`]), read from its annotations and its kind's own fields, with every invalid
//! field reported. The webhook denies an object when [`OwnSettings::read`] reports errors; the
//! controller acts on the valid part only. One reader for both, so they never disagree. Which
//! setting gives the TTL after an outcome is [`OwnSettings::ttl_after`]'s rule, said once: the
//! deadline ([`crate::expiry`]) and the explanation of it ([`crate::setting`]) both ask it.

use std::time::Duration;

use serde_json::Value;

use crate::annotations::{
    self, AnnotationPolicy, TTL_AFTER_FAILED, TTL_AFTER_FINISHED, TTL_AFTER_SUCCEEDED,
};
use crate::duration;
use crate::field_error::FieldError;
use crate::json::field;
use crate::kinds::{Entry, Fields, Registry, RunFields, TtlFields, TtlUnit};
use crate::progress::Outcome;

/// Time-to-live per outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ttls {
    pub after_succeeded: Option<Duration>,
    pub after_failed: Option<Duration>,
}

impl Ttls {
    pub fn is_empty(&self) -> bool {
        self.after_succeeded.is_none() && self.after_failed.is_none()
    }

    /// The TTL after `outcome`.
    pub fn after(self, outcome: Outcome) -> Option<Duration> {
        match outcome {
            Outcome::Succeeded => self.after_succeeded,
            Outcome::Failed => self.after_failed,
        }
    }
}

/// What a parent (Shipwright Build, BuildConfig) sets for the runs it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunPolicy {
    pub ttls: Ttls,
    pub succeeded_limit: Option<u32>,
    pub failed_limit: Option<u32>,
    pub at_build_deletion: bool,
}

/// Which of an object's settings gives the TTL after an outcome (see [`OwnSettings::ttl_after`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlSource {
    /// This annotation: the outcome's own (`ttl-after-succeeded`, `ttl-after-failed`) or
    /// `ttl-after-finished`.
    Annotation(&'static str),
    /// The object's own field for the outcome ([`Fields::own`]).
    Own,
    /// A field the run inherited from its parent ([`inherited_ttl`] says which).
    Inherited,
}

/// Everything an object says about retention itself: its annotations, its kind's fields, what it
/// inherited (a RetentionPolicy's settings are [`crate::policies::Rules`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnSettings {
    pub annotations: AnnotationPolicy,
    /// The object's own TTL fields (BuildRun `spec.retention`, OpenShift Build TTL seconds).
    pub own: Ttls,
    /// TTLs from the Build a BuildRun runs: the embedded `spec.build.spec.retention`, else the
    /// snapshot Shipwright keeps in `status.buildSpec.retention`.
    pub inherited: Ttls,
    /// What this object sets for its runs (Build, BuildConfig).
    pub runs: RunPolicy,
}

impl OwnSettings {
    /// Reads the policy of a JSON object (apiVersion, kind, metadata, spec, status) by the
    /// built-in entry of its kind.
    pub fn read(object: &Value) -> (Self, Vec<FieldError>) {
        Self::read_as(Registry::entry_of(object), object)
    }

    /// Reads the policy of a JSON object of the kind `entry` describes.
    pub fn read_as(entry: &Entry, object: &Value) -> (Self, Vec<FieldError>) {
        let (annotations, mut errors) = annotations::parse(&annotations::of(object));
        let fields = &entry.fields;
        let mut reader = Reader {
            object,
            errors: &mut errors,
        };
        let own = fields.own.map(|own| reader.ttls(&own)).unwrap_or_default();
        let runs = fields
            .runs
            .map(|runs| reader.runs(&runs))
            .unwrap_or_default();
        // The embedded parent's settings are validated like the parent's own; their values,
        // like the snapshot's, are read by `inherited_ttl`.
        if let Some(embedded) = fields.embedded {
            reader.runs(&embedded);
        }
        let inherited = |outcome| inherited_ttl(fields, object, outcome).map(|(ttl, _)| ttl);
        let policy = OwnSettings {
            annotations,
            own,
            inherited: Ttls {
                after_succeeded: inherited(Outcome::Succeeded),
                after_failed: inherited(Outcome::Failed),
            },
            runs,
        };
        (policy, errors)
    }

    /// The TTL that applies after `outcome`, and the setting it comes from — the one place
    /// of this precedence: the outcome's own annotation, then `ttl-after-finished`, then the
    /// object's own field, then what it inherited.
    pub fn ttl_after(&self, outcome: Outcome) -> Option<(Duration, TtlSource)> {
        let annotations = &self.annotations;
        let (key, specific) = match outcome {
            Outcome::Succeeded => (TTL_AFTER_SUCCEEDED, annotations.after_succeeded),
            Outcome::Failed => (TTL_AFTER_FAILED, annotations.after_failed),
        };
        [
            (TtlSource::Annotation(key), specific),
            (
                TtlSource::Annotation(TTL_AFTER_FINISHED),
                annotations.after_finished,
            ),
            (TtlSource::Own, self.own.after(outcome)),
            (TtlSource::Inherited, self.inherited.after(outcome)),
        ]
        .into_iter()
        .find_map(|(source, ttl)| Some((ttl?, source)))
    }

    /// The TTL that applies after each outcome ([`OwnSettings::ttl_after`]).
    pub fn ttls(&self) -> Ttls {
        let ttl = |outcome| self.ttl_after(outcome).map(|(ttl, _)| ttl);
        Ttls {
            after_succeeded: ttl(Outcome::Succeeded),
            after_failed: ttl(Outcome::Failed),
        }
    }

    /// Whether any TTL applies, so kube-retention owns `retention.dev/expires-at`.
    pub fn has_ttl(&self) -> bool {
        self.annotations.ttl.is_some() || !self.ttls().is_empty()
    }
}

/// The TTL a run of a kind with `fields` inherited for `outcome`, and the fields it was read
/// from: the first of [`Fields::inherited`] that sets a valid one. Read without errors — the
/// snapshot is another system's, never a reason to deny, and the embedded settings are
/// validated by [`OwnSettings::read_as`].
pub fn inherited_ttl(
    fields: &Fields,
    object: &Value,
    outcome: Outcome,
) -> Option<(Duration, TtlFields)> {
    fields.inherited().find_map(|ttl_fields| {
        let ttls = Reader {
            object,
            errors: &mut Vec::new(),
        }
        .ttls(&ttl_fields);
        Some((ttls.after(outcome)?, ttl_fields))
    })
}

struct Reader<'a> {
    object: &'a Value,
    errors: &'a mut Vec<FieldError>,
}

impl Reader<'_> {
    fn ttls(&mut self, fields: &TtlFields) -> Ttls {
        let example = match fields.unit {
            TtlUnit::Duration => format!("{{\"{}\": \"36h\"}}", fields.succeeded),
            TtlUnit::Seconds => format!("{{\"{}\": 3600}}", fields.succeeded),
        };
        self.expect_object(fields.within, &example);
        let read = |reader: &mut Self, path: String| match fields.unit {
            TtlUnit::Duration => reader.duration(&path),
            TtlUnit::Seconds => reader.ttl_seconds(&path),
        };
        Ttls {
            after_succeeded: read(self, fields.succeeded_path()),
            after_failed: read(self, fields.failed_path()),
        }
    }

    fn runs(&mut self, fields: &RunFields) -> RunPolicy {
        let ttls = self.ttls(&fields.ttls);
        let within = fields.ttls.within;
        let limits = &fields.limits;
        let succeeded_limit = self.limit(&format!("{within}.{}", limits.succeeded), limits.range);
        let failed_limit = self.limit(&format!("{within}.{}", limits.failed), limits.range);
        let at_build_deletion = fields
            .owned_by_parent
            .is_some_and(|name| self.flag(&format!("{within}.{name}")));
        RunPolicy {
            ttls,
            succeeded_limit,
            failed_limit,
            at_build_deletion,
        }
    }

    fn flag(&mut self, path: &str) -> bool {
        match field(self.object, path) {
            None => false,
            Some(Value::Bool(value)) => *value,
            Some(other) => {
                self.errors
                    .push(FieldError::new(path, other, "must be true or false"));
                false
            }
        }
    }

    fn expect_object(&mut self, path: &str, example: &str) {
        if let Some(value) = field(self.object, path).filter(|value| !value.is_object()) {
            let rule = format!("must be an object, e.g. {example}");
            self.errors.push(FieldError::new(path, value, rule));
        }
    }

    fn duration(&mut self, path: &str) -> Option<Duration> {
        let value = field(self.object, path)?;
        let parsed = match value.as_str() {
            Some(text) => duration::parse(text).map_err(|error| error.to_string()),
            None => Err(format!(
                "is not a duration string: {}",
                duration::GRAMMAR_HINT
            )),
        };
        parsed
            .map_err(|rule| self.errors.push(FieldError::new(path, value, rule)))
            .ok()
    }

    fn limit(&mut self, path: &str, (min, max): (u32, u32)) -> Option<u32> {
        let value = field(self.object, path)?;
        let example = 10.clamp(min, max);
        let allowed = format!("use a whole number from {min} to {max}, e.g. {example}");
        let rule = match value.as_i64() {
            Some(number) if number > i64::from(max) => {
                format!("is above the limit of {max}: {allowed}")
            }
            Some(number) if number < i64::from(min) => format!("is below {min}: {allowed}"),
            Some(number) => return u32::try_from(number).ok(),
            None => format!("is not a whole number: {allowed}"),
        };
        self.errors.push(FieldError::new(path, value, rule));
        None
    }

    fn ttl_seconds(&mut self, path: &str) -> Option<Duration> {
        let value = field(self.object, path)?;
        let allowed = "use a whole number of seconds from 0 to 2147483647, e.g. 3600";
        let rule = match value.as_i64() {
            Some(seconds) if (0..=i64::from(i32::MAX)).contains(&seconds) => {
                return Some(Duration::from_secs(seconds.unsigned_abs()));
            }
            Some(seconds) if seconds < 0 => format!("is negative: {allowed}"),
            Some(_) => format!("is too large: {allowed}"),
            None => format!("is not a whole number: {allowed}"),
        };
        self.errors.push(FieldError::new(path, value, rule));
        None
    }
}
