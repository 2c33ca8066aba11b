//! Runs: turning a watched object into its compact record, its deadline and any stamp, and
//! keeping the group it belongs to for limits.

use kube::api::DynamicObject;
use kube_retention_common::{Expiry, Policy, Progress, annotations, expiry::format_timestamp};
use serde_json::Value;

use super::*;

impl State {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_applied(
        &mut self,
        kind: usize,
        namespace: Arc<str>,
        name: &str,
        object: &DynamicObject,
        value: &Value,
        grouping: Option<&Grouping>,
        now: Timestamp,
    ) -> Vec<Action> {
        let key = Key {
            kind,
            namespace: namespace.clone(),
            name: name.into(),
        };
        let (policy, _) = Policy::read(value);
        let progress = Progress::of(value);
        let created = object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|time| time.0);
        let expiry = Expiry::compute(&policy, created, progress, now);
        if let Some(at) = progress.finished().and_then(|finished| finished.at)
            && at > now + jiff::SignedDuration::from_secs(1)
        {
            tracing::warn!(namespace = %namespace, name, finished_at = %at, "finish time is in the future (clock skew?); waiting");
        }
        let deadline = match (progress, expiry) {
            (Progress::Running, _) => None,
            (_, Expiry::At(at)) => Some(at),
            (_, Expiry::Unmanaged) => policy.annotations.expires_at,
            (_, Expiry::Keep | Expiry::NotYet) => None,
        };
        let label = |key: &str| {
            object
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(key))
                .map(|value| value.as_str().into())
        };
        let group = match grouping {
            Some(Grouping::Label { key, fallback, .. }) => label(key).or_else(|| {
                let name = kube_retention_common::kind::field(value, (*fallback)?)?.as_str()?;
                Some(name.into())
            }),
            Some(Grouping::FixedLimits { label: key, .. }) => label(key),
            Some(Grouping::Annotation { key, .. }) => object
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(key))
                .map(|value| value.as_str().into()),
            None => None,
        };
        let owner = match grouping {
            Some(Grouping::Label { .. } | Grouping::Annotation { .. }) => None,
            _ => object
                .metadata
                .owner_references
                .as_ref()
                .and_then(|owners| owners.first())
                .map(|owner| {
                    Box::new(EventTarget {
                        api_version: owner.api_version.clone(),
                        kind: owner.kind.clone(),
                        name: owner.name.clone(),
                        uid: Some(owner.uid.clone()),
                    })
                }),
        };
        let previous = self.runs.remove(&key);
        if let Some(previous) = &previous
            && let Some(at) = previous.deadline
        {
            self.queue.remove(&(at, key.clone()));
        }
        let resource_version: CompactString = object
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
            .into();
        let newer = previous
            .as_ref()
            .is_none_or(|previous| previous.resource_version != resource_version);
        let mut record = Record {
            uid: Uid::new(object.metadata.uid.as_deref().unwrap_or_default()),
            resource_version,
            created: created.unwrap_or(now),
            outcome: progress.finished().map(|finished| finished.outcome),
            deadline,
            keep: policy.annotations.keep,
            deleting: object.metadata.deletion_timestamp.is_some(),
            pending: previous
                .as_ref()
                .is_some_and(|previous| previous.pending && !newer),
            needs_stamp: None,
            stamp_requested: previous
                .as_ref()
                .and_then(|previous| previous.stamp_requested),
            group,
            owner,
        };
        let mut actions = Vec::new();
        let current_stamp = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|all| all.get(annotations::EXPIRES_AT))
            .map(String::as_str);
        // Nothing to announce for an object about to go: its DELETE is the only request it needs.
        if let Expiry::At(at) = expiry
            && at > now
            && !record.deleting
            && current_stamp != Some(format_timestamp(at).as_str())
        {
            record.needs_stamp = Some(at);
            if self.leader && record.stamp_requested != Some(at) {
                record.stamp_requested = Some(at);
                actions.push(Action::Stamp {
                    key: key.clone(),
                    expires_at: format_timestamp(at),
                });
            }
        }
        if let (Some(at), false, false) = (record.deadline, record.keep, record.deleting) {
            self.queue.insert((at, key.clone()));
        }
        let old_group = previous
            .as_ref()
            .and_then(|previous| previous.group.clone());
        let changed_for_limits = previous.as_ref().is_none_or(|previous| {
            previous.outcome != record.outcome
                || previous.keep != record.keep
                || previous.deleting != record.deleting
        }) || old_group != record.group;
        let new_group = record.group.clone();
        self.runs.insert(key.clone(), record);
        if old_group != new_group
            && let Some(old) = old_group
        {
            self.leave_group(kind, &namespace, &old, name);
        }
        if let Some(parent) = new_group {
            let group = GroupKey {
                kind,
                namespace,
                parent,
            };
            self.groups
                .entry(group.clone())
                .or_default()
                .insert(name.into());
            if changed_for_limits {
                actions.extend(self.enforce_limits(&group, now));
            }
        }
        actions
    }

    pub(super) fn leave_group(
        &mut self,
        kind: usize,
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
