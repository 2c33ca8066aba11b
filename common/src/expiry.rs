//! When an object expires: the one computation behind `retention.dev/expires-at`, used by the
//! webhook at admission and by the controller when a run finishes.
//!
//! The earliest applicable deadline wins: creation + `retention.dev/ttl`, and finish time + the
//! TTL for the outcome. `retention.dev/keep: "true"` means never. Without any TTL, kube-retention
//! does not own `expires-at`: a hand-written one is the user's absolute deadline.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::kind::field;
use crate::policy::Policy;
use crate::progress::{Outcome, Progress};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `retention.dev/keep`: never deleted.
    Keep,
    /// No TTL applies; `expires-at`, if present, is the user's own.
    Unmanaged,
    /// A TTL applies once the run finishes.
    NotYet,
    At(Timestamp),
}

impl Expiry {
    /// Computes the expiry of an object with `policy` and `progress`, created at `created`.
    /// `now` stands in for times the object does not carry yet: the creation time of an object
    /// being created, the finish time of a run that says it finished but not when.
    pub fn compute(
        policy: &Policy,
        created: Option<Timestamp>,
        progress: Progress,
        now: Timestamp,
    ) -> Self {
        if policy.annotations.keep {
            return Self::Keep;
        }
        if !policy.has_ttl() {
            return Self::Unmanaged;
        }
        let from_creation = policy
            .annotations
            .ttl
            .and_then(|ttl| add(created.unwrap_or(now), ttl));
        let ttls = policy.ttls();
        let from_finish = progress.finished().and_then(|finished| {
            let ttl = match finished.outcome {
                Outcome::Succeeded => ttls.after_succeeded,
                Outcome::Failed => ttls.after_failed,
            }?;
            add(finished.at.unwrap_or(now), ttl)
        });
        match from_creation.into_iter().chain(from_finish).min() {
            Some(at) => Self::At(at),
            None => Self::NotYet,
        }
    }

    /// The expiry of a JSON object, read with [`Policy::read`] (invalid fields ignored).
    pub fn of(object: &Value, now: Timestamp) -> Self {
        let (policy, _) = Policy::read(object);
        Self::with_policy(&policy, object, now)
    }

    /// The expiry of a JSON object whose policy the caller has already read.
    pub fn with_policy(policy: &Policy, object: &Value, now: Timestamp) -> Self {
        let created = field(object, "metadata.creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|text| text.parse().ok());
        Self::compute(policy, created, Progress::of(object), now)
    }

    /// The `retention.dev/expires-at` value kube-retention writes, when it owns one.
    pub fn annotation(&self) -> Option<String> {
        match self {
            Self::At(at) => Some(format_timestamp(*at)),
            Self::Keep | Self::Unmanaged | Self::NotYet => None,
        }
    }
}

/// RFC 3339 in UTC, with fractional seconds only when there are any.
pub fn format_timestamp(at: Timestamp) -> String {
    at.to_string()
}

fn add(at: Timestamp, ttl: Duration) -> Option<Timestamp> {
    at.checked_add(SignedDuration::try_from(ttl).ok()?).ok()
}
