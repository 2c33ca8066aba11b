//! The notice ahead of a deadline: a Warning Event `RetentionExpiring` on the object at its
//! deadline less `notifyBefore` (a policy's) or `retention.dev/notify-before` (the object's),
//! once per deadline, saying when it goes, by what, and how to keep it longer.
//!
//! Only the leader sends it, from the queue of deadlines ([`super::runs::Runs`]): a record
//! wakes at its notice time as it does at its deadline. Whether it was sent lives in the
//! record, so a leader that takes over (or restarts) sends the notices of deadlines still ahead
//! once more: Kubernetes aggregates the repeat into the same Event, with its count raised.

use jiff::Timestamp;
use kube_retention_common::duration;
use kube_retention_common::kinds::Registry;
use kube_retention_common::policies::PolicyKey;

use super::compact::CompactTime;
use super::failures::object_target;
use super::keys::ObjectKey;
use super::{Action, Warning};

/// When a notice is due, for which deadline, and whether it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Notice {
    pub(super) at: CompactTime,
    pub(super) deadline: CompactTime,
    pub(super) sent: bool,
}

impl Notice {
    /// The notice `at` a time ([`Judgement::notice_at`]) for the record's `deadline`; sent
    /// already if `previous` (the record of an earlier version of the same object) sent it for
    /// the same deadline.
    ///
    /// [`Judgement::notice_at`]: kube_retention_common::governing::Judgement::notice_at
    pub(super) fn new(
        at: Option<Timestamp>,
        deadline: Option<Timestamp>,
        previous: Option<Notice>,
    ) -> Option<Self> {
        let deadline = CompactTime::new(deadline?);
        Some(Self {
            at: CompactTime::new(at?),
            deadline,
            sent: previous.is_some_and(|previous| previous.sent && previous.deadline == deadline),
        })
    }
}

/// The Warning on `key`'s object (its `uid`): its deadline, the `policy` that governs it (none:
/// its own settings), and the snooze that keeps it.
pub(super) fn warning(
    kinds: &Registry,
    key: &ObjectKey,
    uid: &str,
    policy: Option<&PolicyKey>,
    deadline: Timestamp,
    now: Timestamp,
) -> Action {
    let resource = &kinds[key.kind].resource;
    let left = deadline.duration_since(now).unsigned_abs();
    let by = policy.map_or_else(
        || "by its own settings".to_owned(),
        |policy| format!("by {policy}"),
    );
    Action::Warn {
        key: key.clone(),
        target: object_target(kinds, key, uid),
        warning: Warning::Expiring,
        note: format!(
            "kube-retention deletes it at {deadline} (in {}), {by}; to keep it longer: \
             kubectl retention snooze {}/{} -n {} <duration>",
            duration::format(std::time::Duration::from_secs(left.as_secs())),
            resource.kind.to_lowercase(),
            key.name,
            key.namespace,
        ),
    }
}
