//! Parents and their limits: a Build or BuildConfig sets how many finished runs it keeps, and a
//! change on either side re-applies the limit to the parent's group of runs at once.

use kube_retention_common::OwnSettings;
use kube_retention_common::kinds::LabelLimits;
use kube_retention_common::limits::{LimitedRun, over_limit};

use super::*;

impl State {
    pub(super) fn parent_kind(&self, run_kind: KindId) -> Option<KindId> {
        self.kinds.parent_of(run_kind)
    }

    pub(super) fn parent_applied(&mut self, seen: &Seen<'_>, now: Timestamp) -> Vec<Action> {
        let (kind, namespace, name) = (seen.kind, &seen.namespace, seen.name);
        let (policy, _) = OwnSettings::read_as(&self.kinds[kind], seen.value);
        let limits = Limits {
            succeeded: policy.runs.succeeded_limit,
            failed: policy.runs.failed_limit,
        };
        let run_kinds: Vec<KindId> = self.kinds.runs_of(kind).collect();
        let mut actions = Vec::new();
        for run_kind in run_kinds {
            let group = GroupKey {
                kind: run_kind,
                namespace: namespace.clone(),
                parent: name.into(),
            };
            if let Some(uid) = seen.object.metadata.uid.as_deref() {
                self.parent_uids.insert(group.clone(), uid.into());
            }
            let previous = self.limits.insert(group.clone(), limits);
            if previous != Some(limits) {
                actions.extend(self.enforce_limits(&group, now));
            }
        }
        actions
    }

    pub(super) fn enforce_limits(&mut self, group: &GroupKey, now: Timestamp) -> Vec<Action> {
        if !self.leader {
            return Vec::new();
        }
        let limits = match &self.kinds[group.kind].role {
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
        let Some(members) = self.groups.get(group) else {
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
            let Some(record) = self.runs.get(&key) else {
                continue;
            };
            candidates.push(LimitedRun {
                name,
                created: record.created.get(),
                outcome: record.outcome,
                exempt: record.keep || record.deleting,
            });
            keys.push(key);
        }
        let removed: Vec<ObjectKey> = over_limit(&candidates, limits.succeeded, limits.failed)
            .into_iter()
            .map(|index| keys[index].clone())
            .collect();
        let mut actions = Vec::new();
        for key in removed {
            let ready = self
                .runs
                .get(&key)
                .is_some_and(|record| !record.pending && record.ready(now));
            if ready {
                actions.extend(self.delete(key, Reason::Limit, now));
            }
        }
        actions
    }
}
