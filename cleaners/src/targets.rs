//! What a Cleaner's targets resolve to: the objects of each referenced kind in the Cleaner's
//! namespace, kept from one watch per kind and namespace (its first LIST and then its events),
//! and which of them a reference selects — by name, by labels, or all of the kind there.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_retention_common::cleaner::Reference;
use kube_retention_runtime::held::object_held_bytes;

/// The kind a reference names.
pub fn kind_of(reference: &Reference) -> GroupVersionKind {
    GroupVersionKind::gvk(&reference.api_group, &reference.version, &reference.kind)
}

/// Whether `reference` selects `object` (of its kind, in its namespace).
pub fn selects(reference: &Reference, object: &DynamicObject) -> bool {
    match (&reference.name, &reference.match_labels) {
        (Some(name), _) => object.metadata.name.as_ref() == Some(name),
        (None, Some(wanted)) => {
            let labels = object.metadata.labels.as_ref();
            wanted
                .iter()
                .all(|(key, value)| labels.and_then(|labels| labels.get(key)) == Some(value))
        }
        (None, None) => true,
    }
}

/// How an object appears in `status.resolvedTargets`: `name.plural.group/version`.
pub fn describe(resource: &ApiResource, name: &str) -> String {
    if resource.group.is_empty() {
        format!("{name}.{}/{}", resource.plural, resource.version)
    } else {
        format!(
            "{name}.{}.{}/{}",
            resource.plural, resource.group, resource.version
        )
    }
}

/// The objects of one kind in one namespace, by name, as one watch delivers them.
#[derive(Debug)]
pub struct KindObjects {
    pub resource: ApiResource,
    /// Whether whole objects are kept: otherwise only what selecting and deleting them needs.
    bodies: bool,
    listed: bool,
    current: BTreeMap<String, Arc<DynamicObject>>,
    /// Filled during a (re)list, and then replacing `current`.
    relisting: Option<BTreeMap<String, Arc<DynamicObject>>>,
    /// What `current` holds, and `relisting`, in bytes ([`weight`]).
    current_bytes: usize,
    relisting_bytes: usize,
}

impl KindObjects {
    pub fn new(resource: ApiResource, bodies: bool) -> Self {
        Self {
            resource,
            bodies,
            listed: false,
            current: BTreeMap::new(),
            relisting: None,
            current_bytes: 0,
            relisting_bytes: 0,
        }
    }

    /// What its objects hold, in bytes ([`weight`]), the list under way's included.
    pub fn bytes(&self) -> usize {
        self.current_bytes.saturating_add(self.relisting_bytes)
    }

    /// [`KindObjects::bytes`] weighed afresh from every object held: for tests of the
    /// accounting.
    #[cfg(test)]
    pub(crate) fn weighed_afresh(&self) -> usize {
        self.current
            .iter()
            .chain(self.relisting.iter().flatten())
            .map(|(name, object)| weight(name, object))
            .sum()
    }

    /// Whether the first LIST has completed: before it, absence means nothing.
    pub fn listed(&self) -> bool {
        self.listed
    }

    /// Its objects no longer count as listed (the watch is to be started again).
    pub fn unlisted(&mut self) {
        self.listed = false;
    }

    pub fn relist_started(&mut self) {
        self.relisting = Some(BTreeMap::new());
        self.relisting_bytes = 0;
    }

    /// Ends a (re)list: what it did not deliver is gone.
    pub fn relist_done(&mut self) {
        if let Some(fresh) = self.relisting.take() {
            self.current = fresh;
            self.current_bytes = std::mem::take(&mut self.relisting_bytes);
        }
        self.listed = true;
    }

    /// Keeps `object` (its watch decodes it without managed fields, which no condition needs:
    /// [`kube_retention_io::lean`]; without `bodies`, only its name, labels, uid and version); returns it
    /// as kept and the version it replaced.
    pub fn applied(
        &mut self,
        object: DynamicObject,
    ) -> (Option<Arc<DynamicObject>>, Option<Arc<DynamicObject>>) {
        let Some(name) = object.metadata.name.clone() else {
            return (None, None);
        };
        let object = Arc::new(if self.bodies { object } else { trimmed(object) });
        let added = weight(&name, &object);
        let (objects, bytes) = match self.relisting.as_mut() {
            Some(relisting) => (relisting, &mut self.relisting_bytes),
            None => (&mut self.current, &mut self.current_bytes),
        };
        let old = objects.insert(name.clone(), object.clone());
        let removed = old.as_ref().map_or(0, |old| weight(&name, old));
        *bytes = bytes.saturating_sub(removed).saturating_add(added);
        (Some(object), old)
    }

    pub fn deleted(&mut self, name: &str) -> Option<Arc<DynamicObject>> {
        let gone = self.current.remove(name);
        if let Some(gone) = &gone {
            self.current_bytes = self.current_bytes.saturating_sub(weight(name, gone));
        }
        gone
    }

    /// The objects `reference` selects, by name.
    pub fn selected<'a>(
        &'a self,
        reference: &'a Reference,
    ) -> impl Iterator<Item = &'a Arc<DynamicObject>> + 'a {
        let by_name = reference.name.as_ref().map(|name| self.current.get(name));
        let all = match by_name {
            Some(_) => None,
            None => Some(self.current.values()),
        };
        by_name
            .flatten()
            .into_iter()
            .chain(all.into_iter().flatten())
            .filter(move |object| selects(reference, object))
    }
}

/// What keeping `object` under `name` takes, in bytes: its place in the map, its name, and
/// the object as held ([`object_held_bytes`]: every value, entry and text of its metadata and
/// data, each map's nodes and each allocation's overhead included). Weighed, not estimated from
/// the object's size on the wire: a map of one entry, 13 bytes of JSON, holds some 650.
pub fn weight(name: &str, object: &DynamicObject) -> usize {
    const SLOT: usize = 64;
    SLOT.saturating_add(name.len())
        .saturating_add(object_held_bytes(object))
}

/// What a Cleaner needs of an object no condition reads: its name and namespace to select and
/// describe it, its labels to select it, its uid to delete exactly it.
fn trimmed(object: DynamicObject) -> DynamicObject {
    let metadata = object.metadata;
    DynamicObject {
        types: object.types,
        metadata: kube::api::ObjectMeta {
            name: metadata.name,
            namespace: metadata.namespace,
            labels: metadata.labels,
            uid: metadata.uid,
            resource_version: metadata.resource_version,
            ..kube::api::ObjectMeta::default()
        },
        data: serde_json::Value::Null,
    }
}
