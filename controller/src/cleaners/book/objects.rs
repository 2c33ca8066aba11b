//! The targets' side of the book: discovery's answers for the kinds Cleaners refer to, their
//! objects as the watches deliver them, and which Cleaners each change wakes.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::{Book, CleanerKey, KindState};
use crate::cleaners::targets::{KindObjects, kind_of, selects};

impl Book {
    /// The kinds some Cleaner refers to, and whether each awaits discovery.
    pub fn kinds(&self) -> impl Iterator<Item = (&GroupVersionKind, &KindState)> {
        self.kinds.iter()
    }

    /// Discovery's answer for `kind`; its Cleaners are evaluated again.
    pub fn resolved(&mut self, kind: &GroupVersionKind, answer: Result<ApiResource, Unavailable>) {
        let Some(state) = self.kinds.get_mut(kind) else {
            return;
        };
        *state = match answer {
            Ok(resource) => KindState::Served(KindObjects::new(resource)),
            Err(reason) => KindState::Unavailable(reason.to_string()),
        };
        self.wake_kind(kind);
    }

    pub fn objects_mut(&mut self, kind: &GroupVersionKind) -> Option<&mut KindObjects> {
        match self.kinds.get_mut(kind) {
            Some(KindState::Served(objects)) => Some(objects),
            _ => None,
        }
    }

    /// A (re)list of `kind` ended: its Cleaners are evaluated again.
    pub fn objects_listed(&mut self, kind: &GroupVersionKind) {
        if let Some(objects) = self.objects_mut(kind) {
            objects.relist_done();
        }
        self.wake_kind(kind);
    }

    /// A target object changed: the Cleaners it was or is selected by wake at once.
    pub fn object_applied(&mut self, kind: &GroupVersionKind, object: DynamicObject) {
        let Some(objects) = self.objects_mut(kind) else {
            return;
        };
        let listing = !objects.listed();
        let new = Arc::new(object.clone());
        let old = objects.applied(object);
        if !listing {
            self.wake_selecting(kind, [Some(new), old].into_iter().flatten());
        }
    }

    pub fn object_deleted(&mut self, kind: &GroupVersionKind, namespace: &str, name: &str) {
        let gone = self
            .objects_mut(kind)
            .and_then(|objects| objects.deleted(namespace, name));
        self.wake_selecting(kind, gone);
    }

    fn wake_selecting(
        &mut self,
        kind: &GroupVersionKind,
        objects: impl IntoIterator<Item = Arc<DynamicObject>>,
    ) {
        for object in objects {
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            let Some(keys) = self.wanted.get(&(kind.clone(), namespace)) else {
                continue;
            };
            for key in keys {
                let selected = self.cleaners.get(key).is_some_and(|tracked| {
                    tracked.spec.targets.iter().any(|target| {
                        &kind_of(&target.reference) == kind && selects(&target.reference, &object)
                    })
                });
                if selected {
                    self.woken.insert(key.clone());
                }
            }
        }
    }

    fn wake_kind(&mut self, kind: &GroupVersionKind) {
        let keys = self.wanted.iter().filter(|((wanted, _), _)| wanted == kind);
        let keys: Vec<CleanerKey> = keys.flat_map(|(_, keys)| keys.iter().cloned()).collect();
        self.woken.extend(keys);
    }

    /// Kinds that could not be watched are looked up again.
    pub fn retry_unavailable(&mut self) {
        for state in self.kinds.values_mut() {
            if matches!(state, KindState::Unavailable(_)) {
                *state = KindState::Resolving;
            }
        }
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
}
