//! Relists: after a watch lists afresh (a restart, a 410 Gone), what it did not list again is
//! gone; and kinds watched from now on, or no longer.

use kube_retention_common::kinds::{Entry, RegistryError};

use super::*;

impl State {
    /// A kind to track from now on (found by discovery, or a policy's).
    pub fn add_kind(&mut self, entry: Entry) -> Result<KindId, RegistryError> {
        self.kinds.add(entry)
    }

    /// A kind no longer watched: its records go (its entry stays, so its id stays valid).
    pub fn forget_kind(&mut self, kind: KindId) {
        let keys: Vec<ObjectKey> = self
            .runs
            .keys()
            .filter(|key| key.kind == kind)
            .cloned()
            .collect();
        for key in keys {
            self.removed(kind, &key.namespace, &key.name);
        }
        self.stragglers.retain(|key, _| key.kind != kind);
        self.relisting.remove(&kind);
        self.deferred.retain(|group| group.kind != kind);
    }

    /// A (re)list of `kind` begins: objects not seen again by [`State::relist_done`] are gone.
    pub fn relist_started(&mut self, kind: KindId) {
        self.relisting.insert(kind, HashSet::new());
        for (_, record) in self.runs.iter_mut().filter(|(key, _)| key.kind == kind) {
            record.listed = false;
        }
    }

    /// The (re)list of `kind` is complete: what it did not list is gone, and the limits of the
    /// groups it changed are enforced now, once per group, with every member known.
    pub fn relist_done(&mut self, kind: KindId, now: Timestamp) -> Vec<Action> {
        let Some(seen) = self.relisting.remove(&kind) else {
            return Vec::new();
        };
        let gone: Vec<NamespacedName> = if self.kinds[kind].role == Role::Parent {
            self.limits
                .keys()
                .filter(|group| self.parent_kind(group.kind) == Some(kind))
                .map(|group| (group.namespace.clone(), group.parent.clone()))
                .filter(|parent| !seen.contains(parent))
                .collect()
        } else {
            self.runs
                .iter()
                .filter(|(key, record)| key.kind == kind && !record.listed)
                .map(|(key, _)| (key.namespace.clone(), key.name.clone()))
                .collect()
        };
        for (namespace, name) in gone {
            self.removed(kind, &namespace, &name);
        }
        let groups: Vec<GroupKey> = self
            .deferred
            .iter()
            .filter(|group| group.kind == kind)
            .cloned()
            .collect();
        let mut actions = Vec::new();
        for group in groups {
            self.deferred.remove(&group);
            actions.extend(self.enforce_limits(&group, now));
        }
        actions
    }
}
