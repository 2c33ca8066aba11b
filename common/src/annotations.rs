//! The `retention.dev/*` annotations, which give any object a retention policy.
//!
//! | annotation | meaning |
//! | --- | --- |
//! | `retention.dev/ttl` | delete this long after creation (every duration: Go's grammar, at most [`DURATION_CHARS`] characters) |
//! | `retention.dev/ttl-after-succeeded` | delete this long after finishing successfully |
//! | `retention.dev/ttl-after-failed` | delete this long after failing |
//! | `retention.dev/ttl-after-finished` | both of the above (the specific ones win) |
//! | `retention.dev/expires-at` | delete at this RFC 3339 time ([`crate::rfc3339`]); stamped by kube-retention when a TTL applies |
//! | `retention.dev/stamped` | the `expires-at` kube-retention wrote: while the two agree, `expires-at` is its stamp |
//! | `retention.dev/keep` | `"true"`: never delete; wins over everything |
//! | `retention.dev/snoozed-until` | not deleted before this RFC 3339 time, whatever decides the deadline (`kubectl retention snooze`) |
//! | `retention.dev/notify-before` | a Warning Event `RetentionExpiring` on the object this long before its deadline |
//!
//! kube-retention owns its stamp and only its stamp: it writes `expires-at` and `stamped` together,
//! so an `expires-at` that differs from `stamped` (or stands alone) is the user's own deadline,
//! and a stamp left behind when no TTL applies any more is removed, never acted on.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::duration;
use crate::field_error::FieldError;
use crate::rfc3339;

pub const PREFIX: &str = "retention.dev/";
pub const TTL: &str = "retention.dev/ttl";
pub const TTL_AFTER_SUCCEEDED: &str = "retention.dev/ttl-after-succeeded";
pub const TTL_AFTER_FAILED: &str = "retention.dev/ttl-after-failed";
pub const TTL_AFTER_FINISHED: &str = "retention.dev/ttl-after-finished";
pub const EXPIRES_AT: &str = "retention.dev/expires-at";
pub const STAMPED: &str = "retention.dev/stamped";
pub const KEEP: &str = "retention.dev/keep";
/// Not deleted before this time: pushes whatever deadline governs, never brings one forward.
pub const SNOOZED_UNTIL: &str = "retention.dev/snoozed-until";
/// Warn this long before the deadline (overrides a policy's `notifyBefore`).
pub const NOTIFY_BEFORE: &str = "retention.dev/notify-before";
/// On a RetentionPolicy or ClusterRetentionPolicy: the generation approved to delete more at once
/// than its blast-radius guard allows (`kubectl retention approve`).
pub const APPROVED_GENERATION: &str = "retention.dev/approved-generation";

macro_rules! managed_label {
    () => {
        "retention.dev/managed"
    };
}
/// The label on every object kube-retention schedules, for the controller's server-side
/// label selectors.
pub const MANAGED_LABEL: &str = managed_label!();
/// [`MANAGED_LABEL`] as a label selector.
pub const MANAGED_SELECTOR: &str = concat!(managed_label!(), "=true");
/// Every object [`MANAGED_SELECTOR`] leaves out: the stragglers' metadata watch. An object the
/// controller labels leaves it (the API server tells the watch it is gone) as it enters the
/// labelled watch.
pub const UNMANAGED_SELECTOR: &str = concat!(managed_label!(), "!=true");

const KNOWN: [&str; 9] = [
    TTL,
    TTL_AFTER_SUCCEEDED,
    TTL_AFTER_FAILED,
    TTL_AFTER_FINISHED,
    EXPIRES_AT,
    STAMPED,
    KEEP,
    SNOOZED_UNTIL,
    NOTIFY_BEFORE,
];

/// What an object's annotations say about its retention.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnotationPolicy {
    pub keep: bool,
    pub ttl: Option<Duration>,
    pub after_succeeded: Option<Duration>,
    pub after_failed: Option<Duration>,
    pub after_finished: Option<Duration>,
    pub expires_at: Option<Timestamp>,
    /// The `expires-at` value kube-retention stamped.
    pub stamped: Option<Timestamp>,
    /// Not deleted before this time.
    pub snoozed_until: Option<Timestamp>,
    /// Warn this long before the deadline.
    pub notify_before: Option<Duration>,
}

impl AnnotationPolicy {
    /// Whether `expires-at` is kube-retention's own stamp rather than the user's deadline.
    pub fn carries_stamp(&self) -> bool {
        self.expires_at.is_some() && self.expires_at == self.stamped
    }

    /// The user's own absolute deadline: `expires-at`, unless it is kube-retention's stamp.
    pub fn own_deadline(&self) -> Option<Timestamp> {
        self.expires_at.filter(|_| !self.carries_stamp())
    }

    /// Any TTL or `expires-at`: the object is kube-retention's to watch.
    pub fn has_settings(&self) -> bool {
        self.ttl.is_some()
            || self.after_succeeded.is_some()
            || self.after_failed.is_some()
            || self.after_finished.is_some()
            || self.expires_at.is_some()
    }
}

/// The JSON path of an annotation, as Kubernetes writes it in its own errors.
pub fn path(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// Parses the `retention.dev/*` annotations. Invalid values are reported, and left out of the
/// policy, so a caller that must act anyway (the controller) acts only on what is certain.
pub fn parse(annotations: &BTreeMap<String, String>) -> (AnnotationPolicy, Vec<FieldError>) {
    let mut policy = AnnotationPolicy::default();
    let mut errors = Vec::new();
    for (key, value) in annotations.range(PREFIX.to_owned()..) {
        let Some(_) = key.strip_prefix(PREFIX) else {
            break;
        };
        let json = Value::String(value.clone());
        let mut duration = |slot: &mut Option<Duration>| match duration_of(value) {
            Ok(parsed) => *slot = Some(parsed),
            Err(rule) => errors.push(FieldError::new(path(key), &json, rule)),
        };
        match key.as_str() {
            TTL => duration(&mut policy.ttl),
            TTL_AFTER_SUCCEEDED => duration(&mut policy.after_succeeded),
            TTL_AFTER_FAILED => duration(&mut policy.after_failed),
            TTL_AFTER_FINISHED => duration(&mut policy.after_finished),
            NOTIFY_BEFORE => duration(&mut policy.notify_before),
            EXPIRES_AT | STAMPED | SNOOZED_UNTIL => match rfc3339::parse(value) {
                Some(at) if key == EXPIRES_AT => policy.expires_at = Some(at),
                Some(at) if key == STAMPED => policy.stamped = Some(at),
                Some(at) => policy.snoozed_until = Some(at),
                None => errors.push(FieldError::new(path(key), &json, rfc3339::RULE)),
            },
            KEEP => match value.as_str() {
                "true" => policy.keep = true,
                "false" => {}
                _ => errors.push(FieldError::new(
                    path(key),
                    &json,
                    "must be \"true\" (never delete) or \"false\"",
                )),
            },
            _ => errors.push(FieldError::new(
                path(key),
                &json,
                format!(
                    "is not a kube-retention annotation: use one of {}",
                    KNOWN.join(", ")
                ),
            )),
        }
    }
    (policy, errors)
}

/// The most characters a duration annotation may have: the CRDs' bound on a duration field,
/// generous for any TTL (`2562047h47m16.854775807s`, the longest Go can hold, is 24), and what
/// keeps the API server's own reading of them cheap ([`crate::writer_policy`]).
pub const DURATION_CHARS: usize = crate::schema_bounds::DURATION_BYTES as usize;

/// A duration annotation's value, or what is wrong with it.
fn duration_of(value: &str) -> Result<Duration, String> {
    if value.chars().count() > DURATION_CHARS {
        return Err(format!(
            "is longer than {DURATION_CHARS} characters: {}",
            duration::GRAMMAR_HINT
        ));
    }
    duration::parse(value).map_err(|error| error.to_string())
}

/// Reads `metadata.annotations` of a JSON object; anything malformed reads as none.
pub fn of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn parses_every_annotation() {
        let (policy, errors) = parse(&annotations(&[
            (TTL, "10m"),
            (TTL_AFTER_SUCCEEDED, "1h"),
            (TTL_AFTER_FAILED, "2s"),
            (TTL_AFTER_FINISHED, "1.5h"),
            (EXPIRES_AT, "2026-12-31T23:00:00Z"),
            (STAMPED, "2026-12-31T23:00:00Z"),
            (KEEP, "true"),
            (SNOOZED_UNTIL, "2027-01-01T00:00:00Z"),
            (NOTIFY_BEFORE, "1h"),
            ("unrelated.example/ttl", "whatever"),
        ]));
        assert_eq!(errors, []);
        assert_eq!(
            policy,
            AnnotationPolicy {
                keep: true,
                ttl: Some(Duration::from_secs(600)),
                after_succeeded: Some(Duration::from_secs(3600)),
                after_failed: Some(Duration::from_secs(2)),
                after_finished: Some(Duration::from_secs(5400)),
                expires_at: Some("2026-12-31T23:00:00Z".parse().unwrap()),
                stamped: Some("2026-12-31T23:00:00Z".parse().unwrap()),
                snoozed_until: Some("2027-01-01T00:00:00Z".parse().unwrap()),
                notify_before: Some(Duration::from_secs(3600)),
            }
        );
    }

    #[test]
    fn expires_at_is_a_stamp_only_while_it_agrees_with_stamped() {
        let stamp = "2026-12-31T23:00:00Z";
        let (ours, _) = parse(&annotations(&[(EXPIRES_AT, stamp), (STAMPED, stamp)]));
        assert!(ours.carries_stamp());
        assert_eq!(ours.own_deadline(), None);
        // The same instant written with an offset is still the stamp.
        let (offset, _) = parse(&annotations(&[
            (EXPIRES_AT, "2027-01-01T01:00:00+02:00"),
            (STAMPED, stamp),
        ]));
        assert!(offset.carries_stamp());
        let (edited, _) = parse(&annotations(&[
            (EXPIRES_AT, "2027-01-05T00:00:00Z"),
            (STAMPED, stamp),
        ]));
        assert!(!edited.carries_stamp());
        assert_eq!(edited.own_deadline(), edited.expires_at);
        let (hand_written, _) = parse(&annotations(&[(EXPIRES_AT, stamp)]));
        assert_eq!(hand_written.own_deadline(), hand_written.expires_at);
        let (stamped_only, _) = parse(&annotations(&[(STAMPED, stamp)]));
        assert!(!stamped_only.carries_stamp());
        assert!(!stamped_only.has_settings());
    }

    #[test]
    fn names_each_bad_annotation() {
        let (policy, errors) = parse(&annotations(&[
            (TTL, "soon"),
            (KEEP, "yes"),
            (EXPIRES_AT, "tomorrow"),
            ("retention.dev/tll", "1h"),
        ]));
        assert_eq!(policy, AnnotationPolicy::default());
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 4, "{messages:#?}");
        assert!(messages.contains(&format!(
            "metadata.annotations[retention.dev/ttl]: \"soon\" {}",
            duration::DurationError::Syntax
        )));
        assert!(messages.iter().any(|m| {
            m.starts_with("metadata.annotations[retention.dev/keep]: \"yes\" must be \"true\"")
        }));
        assert!(messages.iter().any(|m| m.starts_with(
            "metadata.annotations[retention.dev/expires-at]: \"tomorrow\" is not an RFC 3339 time"
        )));
        assert!(messages.iter().any(|m| m.starts_with(
            "metadata.annotations[retention.dev/tll]: \"1h\" is not a kube-retention annotation"
        )));
    }

    #[test]
    fn durations_past_their_bound_are_refused_saying_it() {
        let long = "1s".repeat(DURATION_CHARS / 2 + 1);
        let (policy, errors) = parse(&annotations(&[
            (TTL, &long),
            (TTL_AFTER_FINISHED, &"1s".repeat(DURATION_CHARS / 2)),
        ]));
        assert_eq!(policy.ttl, None);
        assert_eq!(
            policy.after_finished,
            Some(Duration::from_secs(DURATION_CHARS as u64 / 2))
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].rule.starts_with("is longer than 64 characters"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn accepts_offsets_in_expires_at() {
        let (policy, errors) = parse(&annotations(&[(EXPIRES_AT, "2026-12-31T23:00:00+02:00")]));
        assert_eq!(errors, []);
        assert_eq!(
            policy.expires_at,
            Some("2026-12-31T21:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn reads_annotations_from_objects_defensively() {
        let object = serde_json::json!({"metadata": {"annotations": {"a": "b", "n": 5}}});
        assert_eq!(of(&object), annotations(&[("a", "b")]));
        assert_eq!(of(&serde_json::json!({"metadata": []})), BTreeMap::new());
    }
}
