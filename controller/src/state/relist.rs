//! Relists: after a watch lists afresh (a restart, a 410 Gone), what it did not list again is gone.

use super::*;

impl State {
    /// A (re)list of `kind` begins: objects not seen again by [`State::relist_done`] are gone.
    pub fn relist_started(&mut self, kind: usize) {
        self.relisting.insert(kind, HashSet::new());
    }

    pub fn relist_done(&mut self, kind: usize) {
        let Some(seen) = self.relisting.remove(&kind) else {
            return;
        };
        let known: Vec<NamespacedName> = if self.kinds[kind].role == Role::Parent {
            self.limits
                .keys()
                .filter(|group| self.parent_kind(group.kind) == Some(kind))
                .map(|group| (group.namespace.clone(), group.parent.clone()))
                .collect()
        } else {
            self.runs
                .keys()
                .filter(|key| key.kind == kind)
                .map(|key| (key.namespace.clone(), key.name.clone()))
                .collect()
        };
        for (namespace, name) in known.into_iter().filter(|known| !seen.contains(known)) {
            self.removed(kind, &namespace, &name);
        }
    }
}
