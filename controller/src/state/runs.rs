//! Runs: turning a watched object into its compact record, its deadline and any change to
//! kube-retention's stamp, and keeping the group it belongs to for limits.

use jiff::SignedDuration;
use kube_retention_common::{Expiry, Progress};

use super::*;

/// A finish time further ahead than this is reported as clock skew.
const SKEW_TOLERANCE: SignedDuration = SignedDuration::from_secs(1);

impl State {
    pub(super) fn run_applied(&mut self, seen: &Seen<'_>, now: Timestamp) -> Vec<Action> {
        let Seen {
            kind,
            ref namespace,
            name,
            object,
            value,
            ..
        } = *seen;
        let key = ObjectKey {
            kind,
            namespace: namespace.clone(),
            name: name.into(),
        };
        let created = object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|time| time.0);
        let governed = self.govern(seen, created, now);
        let entry = &self.kinds[kind];
        let progress = governed.judgement.progress;
        let own = &governed.judgement.own;
        let group = group_of(object, value, &entry.role).or(governed.group);
        let owner = owner_of(object, &entry.role);
        let deadline = match progress {
            Progress::Running => None,
            Progress::Finished(_) | Progress::NotARun => governed.judgement.expiry.deadline(),
        };
        // kube-retention's stamp tells the object's own settings, never a policy's.
        let stamp = Expiry::compute(own, created, progress, now).stamp_change(&own.annotations);
        let future_finish = progress
            .finished()
            .and_then(|finished| finished.at)
            .filter(|at| *at > now + SKEW_TOLERANCE);
        if governed.overruled.is_empty() {
            self.contested.remove(&key);
        } else {
            self.contested
                .insert(key.clone(), governed.overruled.clone());
        }
        let previous = self.runs.remove(&key);
        if let Some(at) = previous.as_ref().and_then(|previous| previous.queued) {
            self.queue.remove(&(at, key.clone()));
        }
        let resource_version: CompactString = object
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
            .into();
        let uid = Uid::new(object.metadata.uid.as_deref().unwrap_or_default());
        // The same object, unchanged since it was last seen (a relist): its history stands.
        let same = previous.as_ref().filter(|previous| {
            previous.resource_version == resource_version && previous.uid == uid
        });
        let same_object = previous.as_ref().filter(|previous| previous.uid == uid);
        let stamps = Stamps {
            needed: stamp,
            requested: same_object.and_then(|previous| previous.stamps().requested),
        };
        let record = Record {
            uid,
            resource_version,
            created: created.unwrap_or(now).into(),
            deadline: deadline.map(CompactTime::new),
            retry_at: same.and_then(|previous| previous.retry_at),
            queued: None,
            stamps: stamps.boxed(),
            group,
            owner,
            policy: governed.policy,
            outcome: progress.finished().map(|finished| finished.outcome),
            failures: same.map_or(0, |previous| previous.failures),
            keep: own.annotations.keep,
            deleting: object.metadata.deletion_timestamp.is_some(),
            pending: same.is_some_and(|previous| previous.pending),
            skew_reported: same_object.is_some_and(|previous| previous.skew_reported)
                || future_finish.is_some(),
            dry_run: governed.dry_run,
            listed: true,
        };
        let mut actions = Vec::new();
        if let Some(finished_at) = future_finish
            && !same_object.is_some_and(|previous| previous.skew_reported)
        {
            tracing::warn!(namespace = %namespace, name, %finished_at, "finish time is in the future (clock skew?); waiting");
            actions.push(Action::Warn {
                key: key.clone(),
                target: super::failures::object_target(&self.kinds, &key, &record.uid.text()),
                warning: Warning::FinishInFuture,
                note: format!(
                    "finished at {finished_at}, {}s ahead of kube-retention's clock (clock skew?): \
                     its TTL counts from that time",
                    finished_at.duration_since(now).as_secs()
                ),
            });
        }
        let changed_for_limits = governed.limits_changed
            || previous.as_ref().is_none_or(|previous| {
                previous.outcome != record.outcome
                    || previous.keep != record.keep
                    || previous.deleting != record.deleting
                    || previous.group != record.group
            });
        let old_group = previous.and_then(|previous| previous.group);
        let new_group = record.group.clone();
        self.runs.insert(key.clone(), Box::new(record));
        if self.leader
            && let Some(record) = self.runs.get_mut(&key)
            && let Some(stamp) = record.stamp_action(&key, now)
        {
            actions.push(stamp);
        }
        self.reschedule(&key);
        if old_group != new_group
            && let Some(old) = old_group
        {
            self.leave_group(kind, namespace, &old, name);
        }
        if let Some(parent) = new_group {
            let group = GroupKey {
                kind,
                namespace: namespace.clone(),
                parent,
            };
            self.groups
                .entry(group.clone())
                .or_default()
                .insert(name.into());
            if changed_for_limits {
                // While a list is under way, once at its end: not once per member listed.
                if self.relisting.contains_key(&kind) {
                    self.deferred.insert(group);
                } else {
                    actions.extend(self.enforce_limits(&group, now));
                }
            }
        }
        actions
    }

    pub(super) fn leave_group(
        &mut self,
        kind: KindId,
        namespace: &Arc<str>,
        parent: &str,
        name: &str,
    ) {
        let group = GroupKey {
            kind,
            namespace: namespace.clone(),
            parent: parent.into(),
        };
        if let Some(members) = self.groups.get_mut(&group) {
            members.remove(name);
            if members.is_empty() {
                self.groups.remove(&group);
            }
        }
    }
}

/// The name of the parent (or the label value) whose limits a run counts against.
fn group_of(object: &DynamicObject, value: &Value, role: &Role) -> Option<CompactString> {
    match role {
        Role::Run {
            parent: Some(parent),
            ..
        } => parent.name_in(value).map(CompactString::from),
        Role::Run {
            limits: Some(limits),
            ..
        } => object
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(&limits.label))
            .map(|value| value.as_str().into()),
        Role::Run { .. } | Role::Parent | Role::Object => None,
    }
}

/// The first owner, where a run has no parent kind of its own to record Events on.
fn owner_of(object: &DynamicObject, role: &Role) -> Option<Box<EventTarget>> {
    if let Role::Run {
        parent: Some(_), ..
    } = role
    {
        return None;
    }
    let owner = object.metadata.owner_references.as_ref()?.first()?;
    Some(Box::new(EventTarget {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: Some(owner.uid.clone()),
    }))
}
