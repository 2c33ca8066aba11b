//! The targets' side of the book: discovery's answers for the kinds Cleaners refer to, the
//! objects of each [`Scope`] as its watch delivers them, and which Cleaners each change wakes.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_retention_runtime::object_memory::Charge;

use super::{Book, KindState, Scope, ScopeState};
use crate::targets::{KindObjects, kind_of, selects};

impl Book {
    /// The kinds some Cleaner refers to, and what discovery said of each.
    pub fn kinds(&self) -> impl Iterator<Item = (&GroupVersionKind, &KindState)> {
        self.kinds.iter()
    }

    /// Discovery's answer for `kind`; the Cleaners referring to it are evaluated again.
    pub fn resolved(&mut self, kind: &GroupVersionKind, answer: Result<ApiResource, Unavailable>) {
        let Some(state) = self.kinds.get_mut(kind) else {
            return;
        };
        self.replan = true;
        *state = match answer {
            Ok(resource) => KindState::Served(resource),
            Err(reason) => KindState::Unavailable(reason.to_string()),
        };
        self.wake_kind(kind);
    }

    /// A (re)list of `scope` began: what it delivers replaces what is held when it ends.
    pub fn objects_relisting(&mut self, scope: &Scope) {
        self.scopes.update(scope, KindObjects::relist_started);
    }

    /// A (re)list of `scope` ended: its Cleaners are evaluated again.
    pub fn objects_listed(&mut self, scope: &Scope) {
        self.scopes.update(scope, KindObjects::relist_done);
        self.wake_scope(scope);
    }

    /// A target object changed, `charge` what it is charged of the controller's budget of
    /// decoded objects (kept while the object is): the Cleaners it was or is selected by wake at
    /// once. Past the bounds on what targets hold ([`super::TARGETS_HELD_PER_NAMESPACE`],
    /// [`super::TARGETS_HELD_IN_ALL`]), the heaviest scopes are let go of.
    pub fn object_applied(&mut self, scope: &Scope, object: DynamicObject, charge: Charge) {
        let Some(listed) = self.scopes.listed(scope) else {
            return;
        };
        self.scopes.absorb(charge);
        let Some((new, old)) = self.scopes.update(scope, |objects| objects.applied(object)) else {
            return;
        };
        if listed {
            self.wake_selecting(scope, new.into_iter().chain(old));
        }
        for let_go in self.scopes.hold_within_bounds(&scope.namespace) {
            self.replan = true;
            self.wake_scope(&let_go);
        }
    }

    pub fn object_deleted(&mut self, scope: &Scope, name: &str) {
        let gone = self
            .scopes
            .update(scope, |objects| objects.deleted(name))
            .flatten();
        self.wake_selecting(scope, gone);
    }

    /// What the targets' objects of `namespace`'s Cleaners hold, in bytes, and every
    /// namespace's together.
    pub fn objects_held(&self, namespace: &str) -> (usize, usize) {
        (self.scopes.held_by(namespace), self.scopes.held())
    }

    fn wake_selecting(
        &mut self,
        scope: &Scope,
        objects: impl IntoIterator<Item = Arc<DynamicObject>>,
    ) {
        let Some(keys) = self.wanted.get(scope) else {
            return;
        };
        for object in objects {
            for key in keys {
                let selected = self.cleaners.get(key).is_some_and(|tracked| {
                    tracked.spec.targets.iter().any(|target| {
                        kind_of(&target.reference) == scope.kind
                            && selects(&target.reference, &object)
                    })
                });
                if selected {
                    self.woken.insert(key.clone());
                }
            }
        }
    }

    fn wake_kind(&mut self, kind: &GroupVersionKind) {
        let keys = self.wanted.iter().filter(|(scope, _)| &scope.kind == kind);
        let keys: Vec<_> = keys.flat_map(|(_, keys)| keys.iter().cloned()).collect();
        self.woken.extend(keys);
    }

    /// Kinds that were not served, and scopes the API server refused, are tried again.
    pub fn retry_unavailable(&mut self) {
        self.replan = true;
        for state in self.kinds.values_mut() {
            if matches!(state, KindState::Unavailable(_)) {
                *state = KindState::Resolving;
            }
        }
        self.scopes
            .retain(|_, state| !matches!(state, ScopeState::Unavailable(_)));
    }
}

/// Why the targets of a kind cannot be watched, as a Cleaner's status says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Discovery did not find the kind (its message).
    #[error("not served by this cluster: {0}")]
    NotServed(String),
    /// The API server refused the list or watch (its message).
    #[error("the controller may not list and watch them: {0}")]
    Forbidden(String),
    /// One of them held more decoded than the controller reads of one object (its name).
    #[error(
        "{0} holds more than the controller decodes of one object ({mib} MiB, as held in memory: a tree of small maps holds up to a hundred times its text), so no target of this kind here is judged; nothing of theirs is deleted until it holds less",
        mib = kube_retention_io::lean::OBJECT_BYTES / (1024 * 1024)
    )]
    PastBound(String),
}
