//! The compact record kept per tracked run (never the object), and what it says is due.

use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use kube_retention_common::expiry::Decider;
use kube_retention_common::{Outcome, StampChange};

use kube_retention_common::kinds::Registry;

use super::compact::CompactTime;
use super::notice::{self, Notice};
use super::{Action, EventTarget, ObjectKey, PolicyKey};

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

/// kube-retention's stamp on an object: the change it needs, and the change last asked for, so
/// each is requested once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Stamps {
    pub(super) needed: Option<StampChange>,
    pub(super) requested: Option<StampChange>,
}

/// What the record announces of its deadline before the deletion: the stamp on the object and
/// the notice. Boxed in the record: most records never need either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Announcements {
    pub(super) stamps: Stamps,
    pub(super) notice: Option<Notice>,
    /// The setting that decided its deadline, kept only for the deletion ledger to say.
    pub(super) decider: Option<Decider>,
}

impl Announcements {
    /// As a record keeps them: nothing at all while there is nothing to say.
    pub(super) fn boxed(self) -> Option<Box<Self>> {
        (self != Self::default()).then(|| Box::new(self))
    }
}

/// Why a run is not to be deleted though due (the two never meet: `retention.dev/keep` makes the
/// object's own settings govern, so no policy's `holdWhile` applies to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kept {
    No,
    /// Annotated `retention.dev/keep: "true"`.
    Annotated,
    /// Its policy's `holdWhile` holds it, until an answer says otherwise.
    OnHold,
}

/// A tracked object, in 136 bytes (a test holds it there): 100,000 of them are the bulk of the
/// controller's memory.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) uid: Uid,
    pub(super) resource_version: CompactString,
    pub(super) created: CompactTime,
    /// When a finished object may go: kube-retention's deadline or the user's own.
    pub(super) deadline: Option<CompactTime>,
    /// While backing off: no write before this time.
    pub(super) retry_at: Option<CompactTime>,
    /// The time of this record's entry in the queue.
    pub(super) queued: Option<CompactTime>,
    pub(super) announcements: Option<Box<Announcements>>,
    pub(super) group: Option<CompactString>,
    pub(super) owner: Option<Box<EventTarget>>,
    /// The retention policy that governs it, if one does.
    pub(super) policy: Option<Arc<PolicyKey>>,
    pub(super) outcome: Option<Outcome>,
    /// Writes (DELETE, stamp) that failed in a row since the object last changed.
    pub(super) failures: u8,
    pub(super) kept: Kept,
    pub(super) deleting: bool,
    /// A DELETE is on its way; cleared by a newer version or a failed attempt.
    pub(super) pending: bool,
    /// A finish time in the future was reported already (once per object).
    pub(super) skew_reported: bool,
    /// That policy only reports what it would delete.
    pub(super) dry_run: bool,
    /// Seen by the list under way of its kind (records not seen again by its end are gone).
    pub(super) listed: bool,
}

impl Record {
    fn announcements(&self) -> Announcements {
        self.announcements.as_deref().copied().unwrap_or_default()
    }

    pub(super) fn stamps(&self) -> Stamps {
        self.announcements().stamps
    }

    pub(super) fn set_stamps(&mut self, stamps: Stamps) {
        self.announcements = Announcements {
            stamps,
            ..self.announcements()
        }
        .boxed();
    }

    pub(super) fn notice(&self) -> Option<Notice> {
        self.announcements().notice
    }

    pub(super) fn decider(&self) -> Option<Decider> {
        self.announcements().decider
    }

    /// The notice not sent yet for the deadline that stands, if one is due at all: never for
    /// a run that is not to be deleted (kept, on hold, in a dry run, being deleted).
    fn unsent_notice(&self) -> Option<Notice> {
        self.notice()
            .filter(|notice| !notice.sent && !self.exempt() && !self.dry_run)
            .filter(|notice| self.deadline == Some(notice.deadline))
    }

    /// The `RetentionExpiring` Warning, if its time has come by `now` and its deadline has not:
    /// marked sent, so it goes once per deadline.
    pub(super) fn notice_action(
        &mut self,
        kinds: &Registry,
        key: &ObjectKey,
        now: Timestamp,
    ) -> Option<Action> {
        let notice = self.unsent_notice()?;
        if notice.at.get() > now || notice.deadline.get() <= now {
            return None;
        }
        self.announcements = Announcements {
            notice: Some(Notice {
                sent: true,
                ..notice
            }),
            ..self.announcements()
        }
        .boxed();
        Some(notice::warning(
            kinds,
            key,
            &self.uid.text(),
            self.policy.as_deref(),
            notice.deadline.get(),
            now,
        ))
    }

    /// A stamp asked for may be asked for again (it failed, or a new leader takes over).
    pub(super) fn forget_stamp_request(&mut self) {
        self.set_stamps(Stamps {
            requested: None,
            ..self.stamps()
        });
    }

    pub(super) fn deadline(&self) -> Option<Timestamp> {
        self.deadline.map(CompactTime::get)
    }

    pub(super) fn ready(&self, now: Timestamp) -> bool {
        self.retry_at.is_none_or(|at| at.get() <= now)
    }

    /// When this record next needs attention, later than `after` if given: its deadline (not
    /// before the end of a backoff), and the end of a backoff with a stamp still to write or a
    /// limit to enforce again — whichever comes first.
    pub(super) fn wake_at(&self, after: Option<Timestamp>) -> Option<CompactTime> {
        if self.kept != Kept::No || self.deleting {
            return None;
        }
        let deletion = self
            .deadline
            .map(|deadline| self.retry_at.map_or(deadline, |retry| retry.max(deadline)));
        let retry = self.retry_at.filter(|_| {
            self.stamps().needed.is_some() || (self.failures > 0 && self.deadline.is_none())
        });
        let notice = self.unsent_notice().map(|notice| notice.at);
        [deletion, retry, notice]
            .into_iter()
            .flatten()
            .filter(|at| after.is_none_or(|after| at.get() > after))
            .min()
    }

    /// Past its deadline and not gone yet: waiting for the request budget, a DELETE in flight, or
    /// a backoff. A dry-run policy's and a kept or held object's never count: they are not to go.
    pub(super) fn overdue(&self, now: Timestamp) -> bool {
        !self.exempt() && !self.dry_run && self.deadline().is_some_and(|at| at <= now)
    }

    /// Kept, on hold or already being deleted: not to be deleted, nor counted against limits.
    pub(super) fn exempt(&self) -> bool {
        self.kept != Kept::No || self.deleting
    }

    pub(super) fn deletable(&self, now: Timestamp) -> bool {
        !self.pending
            && !self.exempt()
            && self.deadline().is_some_and(|at| at <= now)
            && self.ready(now)
    }

    /// The stamp to write now, if one is needed, not asked for yet, and not backing off. A
    /// deadline already passed is not announced: the DELETE is the only request it needs.
    pub(super) fn stamp_action(&mut self, key: &ObjectKey, now: Timestamp) -> Option<Action> {
        let stamps = self.stamps();
        let change = stamps.needed?;
        let worth_it = match change {
            StampChange::Set(at) => at > now,
            StampChange::Remove(_) => true,
        };
        if !worth_it || self.deleting || stamps.requested == Some(change) || !self.ready(now) {
            return None;
        }
        self.set_stamps(Stamps {
            requested: Some(change),
            ..stamps
        });
        Some(Action::Stamp {
            key: key.clone(),
            change,
            resource_version: self.resource_version.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_stays_small() {
        assert_eq!(size_of::<Record>(), 136);
    }
}
