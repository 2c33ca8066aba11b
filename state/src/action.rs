//! What the state asks of the API server, and where deletions are reported.

use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use kube_retention_common::StampChange;

use kube_retention_common::kinds::Registry;

use super::failures::object_target;
use super::groups::LimitGroups;
use super::keys::{GroupKey, ObjectKey};
use super::policies::PolicyKey;
use super::record::Record;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    Ttl,
    Limit,
}

/// Where a deletion's Event is recorded: the parent, else the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTarget {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
}

/// Why kube-retention records a Warning Event on an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning {
    DeleteFailing,
    StampFailing,
    LabelFailing,
    /// The object says it finished in the future (clock skew): it waits.
    FinishInFuture,
    /// Its deadline is `notifyBefore` away.
    Expiring,
}

impl Warning {
    /// The Event's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::DeleteFailing => "RetentionDeleteFailing",
            Self::StampFailing => "RetentionStampFailing",
            Self::LabelFailing => "RetentionLabelFailing",
            Self::FinishInFuture => "RetentionFinishInFuture",
            Self::Expiring => "RetentionExpiring",
        }
    }

    /// The Event's action: what kube-retention does about it.
    pub fn action(self) -> &'static str {
        match self {
            Self::DeleteFailing | Self::StampFailing | Self::LabelFailing => "Retry",
            Self::FinishInFuture => "Wait",
            Self::Expiring => "Delete",
        }
    }
}

/// The policy a deletion follows, and those of the same scope it won over (a later deadline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Governance {
    pub policy: Arc<PolicyKey>,
    pub overruled: Vec<Arc<PolicyKey>>,
}

impl std::fmt::Display for Governance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "by {}", self.policy)?;
        if !self.overruled.is_empty() {
            let others: Vec<String> = self.overruled.iter().map(ToString::to_string).collect();
            write!(
                f,
                ", whose deadline is earlier than {}'s",
                others.join(" and ")
            )?;
        }
        Ok(())
    }
}

/// A deletion as the ledger tells it, beside what the executor knows of it already (the key,
/// uid, reason): who decided, with what setting, the deadline, and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledgered {
    /// `RetentionPolicy team-a/jobs`, `its own settings`, `Build team-a/hello's limits`.
    pub decided_by: String,
    /// `ttlAfterSucceeded: 2h`, `annotation retention.dev/ttl: 30m`, `succeededLimit: 5`.
    pub setting: Option<String>,
    pub deadline: Option<Timestamp>,
    /// The governing policy's `spec.sink`.
    pub sink: Option<Arc<str>>,
    /// Its `archiveBeforeDelete`: the DELETE waits for `sink` to acknowledge the object.
    pub archive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set kube-retention's stamp (`expires-at` and `stamped`, one merge patch), or remove a
    /// stale one (a merge patch carrying `resource_version`, so it applies only to the version
    /// judged and a user's concurrent edit is never lost).
    Stamp {
        key: ObjectKey,
        change: StampChange,
        resource_version: CompactString,
    },
    /// Delete with uid and resourceVersion preconditions.
    Delete {
        key: ObjectKey,
        uid: CompactString,
        resource_version: CompactString,
        reason: Reason,
        /// When it became eligible (for the deletion-delay histogram).
        eligible_at: Timestamp,
        event_target: EventTarget,
        /// The retention policy whose settings it follows, if any.
        policy: Option<Governance>,
        /// What the deletion ledger says of it, where a ledger sink is set (the policy's or
        /// the controller's `--ledger-sink`).
        ledger: Option<Box<Ledgered>>,
    },
    /// Announce to the deletion ledger, no API request: a notice (`dev.retention.expiring`).
    Announce {
        key: ObjectKey,
        event_type: &'static str,
        entry: Box<kube_retention_common::ledger::Entry>,
        /// The governing policy's `spec.sink`, beside the controller's `--ledger-sink`.
        sink: Option<Arc<str>>,
    },
    /// Label an object the webhook never saw `retention.dev/managed`, so the watch takes it in.
    Label { key: ObjectKey },
    /// Record a Warning Event on the object.
    Warn {
        key: ObjectKey,
        target: EventTarget,
        warning: Warning,
        note: String,
    },
}

impl Action {
    /// The object it acts on.
    pub fn key(&self) -> &ObjectKey {
        match self {
            Self::Stamp { key, .. }
            | Self::Delete { key, .. }
            | Self::Label { key }
            | Self::Warn { key, .. }
            | Self::Announce { key, .. } => key,
        }
    }
}

/// Where a deletion's Event is recorded: the parent, else the owner, else the object itself.
pub(super) fn event_target(
    kinds: &Registry,
    groups: &LimitGroups,
    key: &ObjectKey,
    record: &Record,
) -> EventTarget {
    if let (Some(parent), Some(name)) = (kinds.parent_of(key.kind), &record.group) {
        let group = GroupKey::of(key, name.clone());
        let resource = &kinds[parent].resource;
        return EventTarget {
            api_version: resource.api_version(),
            kind: resource.kind.clone(),
            name: name.to_string(),
            uid: groups.parent_uid(&group).map(ToString::to_string),
        };
    }
    if let Some(owner) = &record.owner {
        return (**owner).clone();
    }
    object_target(kinds, key, &record.uid.text())
}
