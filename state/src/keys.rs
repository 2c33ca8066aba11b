//! How the state names what it keeps: an object, a group of runs that share limits, and the
//! namespaces, each interned once (100,000 records name a few hundred namespaces).

use std::collections::HashSet;
use std::sync::Arc;

use compact_str::CompactString;
use kube_retention_common::kinds::KindId;

/// Identifies a tracked object: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: KindId,
    pub namespace: Arc<str>,
    pub name: CompactString,
}

/// A group of runs that share limits: runs of `kind` in `namespace` under parent `parent` (a
/// parent object's name, a label's value, or a policy's group).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct GroupKey {
    pub(super) kind: KindId,
    pub(super) namespace: Arc<str>,
    pub(super) parent: CompactString,
}

impl GroupKey {
    /// The group `parent` of runs like `key`.
    pub(super) fn of(key: &ObjectKey, parent: CompactString) -> Self {
        Self {
            kind: key.kind,
            namespace: key.namespace.clone(),
            parent,
        }
    }
}

/// Namespace and name of an object seen during a relist.
pub(super) type NamespacedName = (Arc<str>, CompactString);

/// Every namespace named so far, once.
#[derive(Debug, Default)]
pub(super) struct Namespaces(HashSet<Arc<str>>);

impl Namespaces {
    pub(super) fn intern(&mut self, namespace: &str) -> Arc<str> {
        if let Some(interned) = self.0.get(namespace) {
            return interned.clone();
        }
        let interned: Arc<str> = Arc::from(namespace);
        self.0.insert(interned.clone());
        interned
    }

    /// The key of `name` of `kind` in `namespace`.
    pub(super) fn key(&mut self, kind: KindId, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: self.intern(namespace),
            name: name.into(),
        }
    }
}
