//! When an object expires: the one computation behind `retention.dev/expires-at`, used by the
//! webhook at admission and by the controller when a run finishes.
//!
//! The earliest applicable deadline wins: creation + `retention.dev/ttl`, and finish time + the
//! TTL for the outcome. `retention.dev/keep: "true"` means never. Without any TTL, kube-retention
//! does not own `expires-at`: a hand-written one is the user's absolute deadline, and a stamp
//! kube-retention wrote for a TTL that is gone is stale — removed, never acted on (KEP-592: no
//! TTL means never expires). [`Expiry::decide`] says which setting decided, from the same
//! computation, so "why this deadline" cannot disagree with the deadline.
//!
//! `retention.dev/snoozed-until` pushes a deadline, whatever decided it, to that time; it never
//! brings one forward, nor gives a deadline to an object that has none. The setting that
//! decided stays the one named: the snooze is said beside it ([`Expiry::snoozed`]).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::annotations::AnnotationPolicy;
use crate::json::field;
use crate::own_settings::{OwnSettings, TtlSource};
use crate::progress::{Outcome, Progress};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `retention.dev/keep`: never deleted.
    Keep,
    /// No TTL and no deadline of the user's: never deleted.
    Never,
    /// No TTL applies; the user's own `expires-at` is an absolute deadline.
    Deadline(Timestamp),
    /// A TTL applies once the run finishes.
    NotYet,
    /// A TTL applies: kube-retention's deadline, which its stamp announces.
    At(Timestamp),
}

/// Which of an [`OwnSettings`]'s settings decided its [`Expiry`], and what it says: the answer to
/// "why this deadline", given by [`Expiry::decide`] with the expiry itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// `retention.dev/keep: "true"`.
    Keep,
    /// The user's own `retention.dev/expires-at`.
    ExpiresAt(Timestamp),
    /// `retention.dev/ttl`, counted from creation.
    Ttl(Duration),
    /// The TTL after the run's outcome, counted from its finish time.
    AfterFinish {
        outcome: Outcome,
        source: TtlSource,
        ttl: Duration,
    },
}

/// How kube-retention's stamp on an object must change to tell the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampChange {
    /// Write `expires-at` and `stamped` with this time.
    Set(Timestamp),
    /// Remove the stale stamp (`expires-at` and `stamped`, both holding this time).
    Remove(Timestamp),
}

impl Expiry {
    /// Computes the expiry of an object with `policy` and `progress`, created at `created`.
    /// `now` stands in for times the object does not carry yet: the creation time of an object
    /// being created, the finish time of a run that says it finished but not when.
    pub fn compute(
        policy: &OwnSettings,
        created: Option<Timestamp>,
        progress: Progress,
        now: Timestamp,
    ) -> Self {
        Self::decide(policy, created, progress, now).0
    }

    /// [`Expiry::compute`], with the setting that decided it (none for [`Expiry::Never`] and
    /// [`Expiry::NotYet`]). Where both a TTL from creation and one from the finish time apply,
    /// the one giving the earlier deadline decides (the one from creation on a tie).
    pub fn decide(
        policy: &OwnSettings,
        created: Option<Timestamp>,
        progress: Progress,
        now: Timestamp,
    ) -> (Self, Option<Decider>) {
        if policy.annotations.keep {
            return (Self::Keep, Some(Decider::Keep));
        }
        let snooze = |at: Timestamp| {
            policy
                .annotations
                .snoozed_until
                .map_or(at, |until| at.max(until))
        };
        if !policy.has_ttl() {
            return match policy.annotations.own_deadline() {
                Some(at) => (Self::Deadline(snooze(at)), Some(Decider::ExpiresAt(at))),
                None => (Self::Never, None),
            };
        }
        let from_creation = policy.annotations.ttl.and_then(|ttl| {
            let at = add(created.unwrap_or(now), ttl)?;
            Some((at, Decider::Ttl(ttl)))
        });
        let from_finish = progress.finished().and_then(|finished| {
            let outcome = finished.outcome;
            let (ttl, source) = policy.ttl_after(outcome)?;
            let at = add(finished.at.unwrap_or(now), ttl)?;
            Some((
                at,
                Decider::AfterFinish {
                    outcome,
                    source,
                    ttl,
                },
            ))
        });
        match from_creation
            .into_iter()
            .chain(from_finish)
            .min_by_key(|(at, _)| *at)
        {
            Some((at, decider)) => (Self::At(snooze(at)), Some(decider)),
            None => (Self::NotYet, None),
        }
    }

    /// The snooze that set this deadline, if `annotations`' `snoozed-until` did (it is the
    /// deadline: the deciding setting alone gives no later one).
    pub fn snoozed(&self, annotations: &AnnotationPolicy) -> Option<Timestamp> {
        let until = annotations.snoozed_until?;
        (self.deadline() == Some(until)).then_some(until)
    }

    /// The expiry of a JSON object, read with [`OwnSettings::read`] (invalid fields ignored).
    pub fn of(object: &Value, now: Timestamp) -> Self {
        let (policy, _) = OwnSettings::read(object);
        Self::with_policy(&policy, object, now)
    }

    /// The expiry of a JSON object whose policy the caller has already read.
    pub fn with_policy(policy: &OwnSettings, object: &Value, now: Timestamp) -> Self {
        let created = field(object, "metadata.creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|text| text.parse().ok());
        Self::compute(
            policy,
            created,
            crate::kinds::Registry::progress_of(object),
            now,
        )
    }

    /// The `retention.dev/expires-at` value kube-retention writes, when it owns one.
    pub fn annotation(&self) -> Option<String> {
        match self {
            Self::At(at) => Some(format_timestamp(*at)),
            Self::Keep | Self::Never | Self::Deadline(_) | Self::NotYet => None,
        }
    }

    /// When the object may be deleted, if it is finished: kube-retention's deadline or the
    /// user's own.
    pub fn deadline(&self) -> Option<Timestamp> {
        match self {
            Self::At(at) | Self::Deadline(at) => Some(*at),
            Self::Keep | Self::Never | Self::NotYet => None,
        }
    }

    /// What must change in kube-retention's stamp on an object with `annotations`: set where a
    /// TTL gives a deadline the stamp does not show yet, removed where no deadline of
    /// kube-retention's stands behind it any more. `keep` leaves everything as it is.
    pub fn stamp_change(&self, annotations: &AnnotationPolicy) -> Option<StampChange> {
        match self {
            Self::At(at) => (annotations.expires_at != Some(*at)
                || annotations.stamped != Some(*at))
            .then_some(StampChange::Set(*at)),
            Self::Never | Self::NotYet if annotations.carries_stamp() => {
                annotations.expires_at.map(StampChange::Remove)
            }
            Self::Keep | Self::Never | Self::NotYet | Self::Deadline(_) => None,
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
