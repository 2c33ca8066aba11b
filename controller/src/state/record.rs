//! The compact record kept per tracked run (never the object), and what it says is due.

use compact_str::CompactString;
use jiff::Timestamp;
use kube_retention_common::{Outcome, StampChange};

use super::{Action, EventTarget, Key};

/// An object's uid: 16 bytes when it is the UUID the API server assigns (always, in practice),
/// its text otherwise, so the precondition always carries exactly what the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Uid {
    Uuid(uuid::Uuid),
    Other(CompactString),
}

impl Uid {
    pub(super) fn new(text: &str) -> Self {
        match uuid::Uuid::try_parse(text) {
            Ok(parsed) if parsed.hyphenated().to_string() == text => Self::Uuid(parsed),
            _ => Self::Other(text.into()),
        }
    }

    pub(super) fn text(&self) -> CompactString {
        match self {
            Self::Uuid(uuid) => CompactString::from(uuid.hyphenated().to_string()),
            Self::Other(text) => text.clone(),
        }
    }
}

#[derive(Debug)]
pub(super) struct Record {
    pub(super) uid: Uid,
    pub(super) resource_version: CompactString,
    pub(super) created: Timestamp,
    pub(super) outcome: Option<Outcome>,
    /// When a finished object may go: kube-retention's deadline or the user's own.
    pub(super) deadline: Option<Timestamp>,
    pub(super) keep: bool,
    pub(super) deleting: bool,
    /// A DELETE is on its way; cleared by a newer version or a failed attempt.
    pub(super) pending: bool,
    /// How kube-retention's stamp on the object must change, if at all.
    pub(super) stamp: Option<StampChange>,
    /// The stamp change last asked for, so each is requested once.
    pub(super) stamp_requested: Option<StampChange>,
    /// Writes (DELETE, stamp) that failed in a row since the object last changed.
    pub(super) failures: u8,
    /// While backing off: no write before this time.
    pub(super) retry_at: Option<Timestamp>,
    /// The time of this record's entry in the queue.
    pub(super) queued: Option<Timestamp>,
    /// A finish time in the future was reported already (once per object).
    pub(super) skew_reported: bool,
    pub(super) group: Option<CompactString>,
    pub(super) owner: Option<Box<EventTarget>>,
    /// The retention policy that governs it, if one does.
    pub(super) policy: Option<std::sync::Arc<super::PolicyKey>>,
    /// That policy only reports what it would delete.
    pub(super) dry_run: bool,
}

impl Record {
    pub(super) fn ready(&self, now: Timestamp) -> bool {
        self.retry_at.is_none_or(|at| at <= now)
    }

    /// When this record next needs attention, later than `after` if given: its deadline (not
    /// before the end of a backoff), and the end of a backoff with a stamp still to write or a
    /// limit to enforce again — whichever comes first.
    pub(super) fn wake_at(&self, after: Option<Timestamp>) -> Option<Timestamp> {
        if self.keep || self.deleting {
            return None;
        }
        let deletion = self
            .deadline
            .map(|deadline| self.retry_at.map_or(deadline, |retry| retry.max(deadline)));
        let retry = self
            .retry_at
            .filter(|_| self.stamp.is_some() || (self.failures > 0 && self.deadline.is_none()));
        [deletion, retry]
            .into_iter()
            .flatten()
            .filter(|at| after.is_none_or(|after| *at > after))
            .min()
    }

    pub(super) fn deletable(&self, now: Timestamp) -> bool {
        !self.pending
            && !self.keep
            && !self.deleting
            && self.deadline.is_some_and(|at| at <= now)
            && self.ready(now)
    }

    /// The stamp to write now, if one is needed, not asked for yet, and not backing off. A
    /// deadline already passed is not announced: the DELETE is the only request it needs.
    pub(super) fn stamp_action(&mut self, key: &Key, now: Timestamp) -> Option<Action> {
        let change = self.stamp?;
        let worth_it = match change {
            StampChange::Set(at) => at > now,
            StampChange::Remove(_) => true,
        };
        if !worth_it || self.deleting || self.stamp_requested == Some(change) || !self.ready(now) {
            return None;
        }
        self.stamp_requested = Some(change);
        Some(Action::Stamp {
            key: key.clone(),
            change,
            resource_version: self.resource_version.clone(),
        })
    }
}
