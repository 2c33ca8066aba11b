//! What the state asks of the API server, and where deletions are reported.

use compact_str::CompactString;
use jiff::Timestamp;
use kube_retention_common::StampChange;

use super::*;

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
}

impl Warning {
    /// The Event's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::DeleteFailing => "RetentionDeleteFailing",
            Self::StampFailing => "RetentionStampFailing",
            Self::LabelFailing => "RetentionLabelFailing",
            Self::FinishInFuture => "RetentionFinishInFuture",
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
            | Self::Warn { key, .. } => key,
        }
    }
}

impl State {
    /// The preconditioned DELETE of `key`, which is pending from now on; in a dry run none, the
    /// deletion reported on its policy instead. `eligible_at` is when it became deletable.
    pub(super) fn delete(
        &mut self,
        key: ObjectKey,
        reason: Reason,
        eligible_at: Timestamp,
    ) -> Option<Action> {
        let record = self.runs.get_mut(&key)?;
        if record.dry_run {
            self.would_have_deleted(&key, eligible_at, reason);
            return None;
        }
        record.pending = true;
        let event_target = Self::event_target(&self.kinds, &self.parent_uids, &key, record);
        Some(Action::Delete {
            uid: record.uid.text(),
            resource_version: record.resource_version.clone(),
            reason,
            eligible_at,
            event_target,
            policy: record.policy.clone().map(|policy| Governance {
                policy,
                overruled: self.contested.get(&key).cloned().unwrap_or_default(),
            }),
            key,
        })
    }

    /// Where a deletion's Event is recorded: the parent, else the owner, else the object itself.
    pub(super) fn event_target(
        kinds: &Registry,
        parent_uids: &HashMap<GroupKey, CompactString>,
        key: &ObjectKey,
        record: &Record,
    ) -> EventTarget {
        let parent = kinds.parent_of(key.kind);
        if let (Some(parent), Some(name)) = (parent, &record.group) {
            let group = GroupKey {
                kind: key.kind,
                namespace: key.namespace.clone(),
                parent: name.clone(),
            };
            let resource = &kinds[parent].resource;
            return EventTarget {
                api_version: resource.api_version(),
                kind: resource.kind.clone(),
                name: name.to_string(),
                uid: parent_uids.get(&group).map(ToString::to_string),
            };
        }
        if let Some(owner) = &record.owner {
            return (**owner).clone();
        }
        super::failures::object_target(kinds, key, &record.uid.text())
    }
}
