//! What a Cleaner's targets resolve to: the objects of each referenced kind in the Cleaner's
//! namespace, kept from one watch per kind and namespace (its first LIST and then its events),
//! and which of them a reference selects — by name, by labels, or all of the kind there.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_retention_common::cleaner::Reference;

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
}

impl KindObjects {
    pub fn new(resource: ApiResource, bodies: bool) -> Self {
        Self {
            resource,
            bodies,
            listed: false,
            current: BTreeMap::new(),
            relisting: None,
        }
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
    }

    /// Ends a (re)list: what it did not deliver is gone.
    pub fn relist_done(&mut self) {
        if let Some(fresh) = self.relisting.take() {
            self.current = fresh;
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
        let objects = self.relisting.as_mut().unwrap_or(&mut self.current);
        let old = objects.insert(name, object.clone());
        (Some(object), old)
    }

    pub fn deleted(&mut self, name: &str) -> Option<Arc<DynamicObject>> {
        self.current.remove(name)
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
