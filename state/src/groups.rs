//! Groups of runs that share limits, and the limits each sets: a parent (a Build, a
//! BuildConfig) by its `succeededLimit`/`failedLimit`, a label-limited kind by its table entry,
//! a policy by its rules. Which members a limit removes is `common::limits`'s rule; this keeps
//! who the members are, the parents' uids (for Events) and the groups whose limits wait for the
//! end of a list.

use std::collections::{HashMap, HashSet};

use compact_str::CompactString;
use kube_retention_common::OwnSettings;
use kube_retention_common::kinds::{KindId, LabelLimits, Registry, Role};
use kube_retention_common::limits::{LimitedRun, over_limit};

use super::keys::{GroupKey, NamespacedName, ObjectKey};
use super::runs::Runs;
use super::seen::Seen;

/// How many finished runs of each outcome a group keeps (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Limits {
    pub(super) succeeded: Option<u32>,
    pub(super) failed: Option<u32>,
}

#[derive(Debug, Default)]
pub(super) struct LimitGroups {
    /// Limits set by parents and policies (a label-limited kind's are in the table).
    limits: HashMap<GroupKey, Limits>,
    parent_uids: HashMap<GroupKey, CompactString>,
    members: HashMap<GroupKey, HashSet<CompactString>>,
    /// Groups whose limits wait for the end of their kind's list.
    deferred: HashSet<GroupKey>,
}

impl LimitGroups {
    /// A group's limits were set (by its parent, with the parent's uid, or by a policy);
    /// answers whether they changed.
    pub(super) fn set_limits(
        &mut self,
        group: GroupKey,
        limits: Limits,
        uid: Option<&str>,
    ) -> bool {
        if let Some(uid) = uid {
            self.parent_uids.insert(group.clone(), uid.into());
        }
        self.limits.insert(group, limits) != Some(limits)
    }

    /// A parent was seen: the limits it sets on each kind of its runs. Answers the groups whose
    /// limits changed.
    pub(super) fn parent_seen(&mut self, kinds: &Registry, parent: &Seen<'_>) -> Vec<GroupKey> {
        let (own, _) = OwnSettings::read_as(&kinds[parent.kind], parent.value);
        let limits = Limits {
            succeeded: own.runs.succeeded_limit,
            failed: own.runs.failed_limit,
        };
        let uid = parent.object.metadata.uid.as_deref();
        kinds
            .runs_of(parent.kind)
            .map(|kind| GroupKey {
                kind,
                namespace: parent.namespace.clone(),
                parent: parent.name.into(),
            })
            .filter(|group| self.set_limits(group.clone(), limits, uid))
            .collect()
    }

    /// The parent `name` of `parent_kind` is gone: its groups keep no limits.
    pub(super) fn parent_gone(
        &mut self,
        kinds: &Registry,
        parent_kind: KindId,
        namespace: &str,
        name: &str,
    ) {
        let gone: Vec<GroupKey> = self
            .limits
            .keys()
            .filter(|group| {
                kinds.parent_of(group.kind) == Some(parent_kind)
                    && &*group.namespace == namespace
                    && group.parent == name
            })
            .cloned()
            .collect();
        for group in gone {
            self.limits.remove(&group);
            self.parent_uids.remove(&group);
        }
    }

    /// The parents of `parent_kind` that set limits.
    pub(super) fn parents(&self, kinds: &Registry, parent_kind: KindId) -> Vec<NamespacedName> {
        self.limits
            .keys()
            .filter(|group| kinds.parent_of(group.kind) == Some(parent_kind))
            .map(|group| (group.namespace.clone(), group.parent.clone()))
            .collect()
    }

    /// A policy's groups, named with `prefix`, are gone with it.
    pub(super) fn forget_policy(&mut self, prefix: &str) {
        self.limits
            .retain(|group, _| !group.parent.starts_with(prefix));
    }

    pub(super) fn join(&mut self, group: GroupKey, name: &str) {
        self.members.entry(group).or_default().insert(name.into());
    }

    pub(super) fn leave(&mut self, group: &GroupKey, name: &str) {
        if let Some(members) = self.members.get_mut(group) {
            members.remove(name);
            if members.is_empty() {
                self.members.remove(group);
            }
        }
    }

    /// The groups with members whose names begin with `prefix` (a policy's).
    pub(super) fn with_prefix(&self, prefix: &str) -> Vec<GroupKey> {
        let named = |group: &&GroupKey| group.parent.starts_with(prefix);
        self.members.keys().filter(named).cloned().collect()
    }

    /// Every group with members.
    pub(super) fn all(&self) -> Vec<GroupKey> {
        self.members.keys().cloned().collect()
    }

    /// The uid of the parent that names `group`, when known.
    pub(super) fn parent_uid(&self, group: &GroupKey) -> Option<&CompactString> {
        self.parent_uids.get(group)
    }

    pub(super) fn defer(&mut self, group: GroupKey) {
        self.deferred.insert(group);
    }

    /// The groups of `kind` that waited for its list to end.
    pub(super) fn take_deferred(&mut self, kind: KindId) -> Vec<GroupKey> {
        let groups: Vec<GroupKey> = self
            .deferred
            .iter()
            .filter(|group| group.kind == kind)
            .cloned()
            .collect();
        for group in &groups {
            self.deferred.remove(group);
        }
        groups
    }

    /// `kind` is no longer watched: none of its groups waits for a list.
    pub(super) fn forget_kind(&mut self, kind: KindId) {
        self.deferred.retain(|group| group.kind != kind);
    }

    /// The members of `group` its limits remove now (kept, held, deleting runs are exempt).
    pub(super) fn over_limit(
        &self,
        group: &GroupKey,
        kinds: &Registry,
        runs: &Runs,
    ) -> Vec<ObjectKey> {
        let limits = match &kinds[group.kind].role {
            Role::Run {
                limits:
                    Some(LabelLimits {
                        succeeded, failed, ..
                    }),
                ..
            } => Limits {
                succeeded: *succeeded,
                failed: *failed,
            },
            _ => match self.limits.get(group) {
                Some(limits) => *limits,
                None => return Vec::new(),
            },
        };
        let Some(members) = self.members.get(group) else {
            return Vec::new();
        };
        let mut keys = Vec::new();
        let mut candidates = Vec::new();
        for name in members {
            let key = ObjectKey {
                kind: group.kind,
                namespace: group.namespace.clone(),
                name: name.clone(),
            };
            let Some(record) = runs.get(&key) else {
                continue;
            };
            candidates.push(LimitedRun {
                name,
                created: record.created.get(),
                outcome: record.outcome,
                exempt: record.exempt(),
            });
            keys.push(key);
        }
        over_limit(&candidates, limits.succeeded, limits.failed)
            .into_iter()
            .map(|index| keys[index].clone())
            .collect()
    }
}

/// When the limits of a run's group are enforced after the run changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Enforce {
    /// It counts for limits as it did.
    Not,
    /// Once its kind's list ends, for all the groups the list changed.
    AtListEnd,
    Now,
}

impl Enforce {
    /// For a run that counts differently for limits (`changed`) or not, while its kind is
    /// `listing` or not.
    pub(super) fn after(changed: bool, listing: bool) -> Self {
        match (changed, listing) {
            (false, _) => Self::Not,
            (true, true) => Self::AtListEnd,
            (true, false) => Self::Now,
        }
    }
}
