//! Lists under way. A watch that lists afresh (at start, after a 410 Gone) sends every object
//! again and then says it is done; what it did not send again is gone. Runs carry a `listed`
//! mark in their record (a set of 100,000 names would cost megabytes at the peak); parents are
//! few, so the names listed are kept here. Limits of the groups a list changed wait for its end,
//! so they are enforced once per group with every member known, not once per member listed.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use kube_retention_common::kinds::KindId;

use super::keys::NamespacedName;
use super::{Action, State};

#[derive(Debug, Default)]
pub(super) struct Lists(HashMap<KindId, HashSet<NamespacedName>>);

impl Lists {
    /// A list of `kind` begins: the parents it sends are noted from now on.
    pub(super) fn started(&mut self, kind: KindId) {
        self.0.insert(kind, HashSet::new());
    }

    pub(super) fn under_way(&self, kind: KindId) -> bool {
        self.0.contains_key(&kind)
    }

    /// A parent of `kind` was sent.
    pub(super) fn parent_listed(&mut self, kind: KindId, parent: NamespacedName) {
        if let Some(listed) = self.0.get_mut(&kind) {
            listed.insert(parent);
        }
    }

    /// The list of `kind` ended (or the kind is no longer watched): the parents it sent, if one
    /// was under way.
    pub(super) fn ended(&mut self, kind: KindId) -> Option<HashSet<NamespacedName>> {
        self.0.remove(&kind)
    }
}

/// What a list means to the state: lists of a kind, cluster-wide or in one namespace (the
/// guards' decision once what they listed is judged is the gate's, [`State::settled`]).
impl State {
    /// A (re)list of `kind` begins: objects not seen again by [`State::relist_done`] are gone.
    pub fn relist_started(&mut self, kind: KindId) {
        let resource = &self.kinds[kind].resource;
        self.guards
            .list_started(&resource.group, &resource.kind, None);
        self.lists.started(kind);
        self.tracker.runs.unlist(kind);
    }

    /// A list of `kind` in `namespace` alone began (a RetentionPolicy there changed): it counts
    /// for that namespace's policies waiting for one. Its objects are judged as they come, as a
    /// watch's: the watch of the kind still says which went.
    pub fn namespace_relist_started(&mut self, kind: KindId, namespace: &str) {
        let resource = &self.kinds[kind].resource;
        let guards = &mut self.guards;
        guards.list_started(&resource.group, &resource.kind, Some(namespace));
    }

    /// The list of `kind` in `namespace` ended.
    pub fn namespace_relist_done(&mut self, kind: KindId, namespace: &str) {
        let resource = &self.kinds[kind].resource;
        let guards = &mut self.guards;
        guards.list_done(&resource.group, &resource.kind, Some(namespace));
    }

    /// An object whose evaluation is under way was listed again: its record stays.
    pub fn listed(&mut self, kind: KindId, namespace: &str, name: &str) {
        let key = self.namespaces.key(kind, namespace, name);
        if let Some(record) = self.tracker.runs.get_mut(&key) {
            record.listed = true;
        }
    }

    /// The (re)list of `kind` is complete: what it did not list is gone, and the limits of the
    /// groups it changed are enforced now, once per group, with every member known.
    pub fn relist_done(&mut self, kind: KindId, now: Timestamp) -> Vec<Action> {
        let Some(listed) = self.lists.ended(kind) else {
            return Vec::new();
        };
        for key in self.tracker.unsent(&self.kinds, kind, &listed) {
            self.forget_run(&key);
        }
        let due = self.tracker.deferred_limits(&self.kinds, kind, now);
        let actions = self.gated(due);
        let resource = &self.kinds[kind].resource;
        self.guards.list_done(&resource.group, &resource.kind, None);
        actions
    }
}
