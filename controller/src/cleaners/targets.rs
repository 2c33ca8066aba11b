//! What a Cleaner's targets resolve to: the objects of each referenced kind, kept from one watch
//! per kind (its first LIST and then its events), and which of them a reference selects — by
//! name, by labels, or all of the kind in the Cleaner's namespace.

use std::collections::{BTreeMap, HashMap};
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

/// The objects of one kind, by namespace and name.
#[derive(Debug)]
pub struct KindObjects {
    pub resource: ApiResource,
    listed: bool,
    current: HashMap<String, BTreeMap<String, Arc<DynamicObject>>>,
    /// Filled during a (re)list, and then replacing `current`.
    relisting: Option<HashMap<String, BTreeMap<String, Arc<DynamicObject>>>>,
}

impl KindObjects {
    pub fn new(resource: ApiResource) -> Self {
        Self {
            resource,
            listed: false,
            current: HashMap::new(),
            relisting: None,
        }
    }

    /// Whether the first LIST has completed: before it, absence means nothing.
    pub fn listed(&self) -> bool {
        self.listed
    }

    pub fn relist_started(&mut self) {
        self.relisting = Some(HashMap::new());
    }

    /// Ends a (re)list: what it did not deliver is gone.
    pub fn relist_done(&mut self) {
        if let Some(fresh) = self.relisting.take() {
            self.current = fresh;
        }
        self.listed = true;
    }

    /// Keeps `object` (its watch decodes it without managed fields, which no condition needs:
    /// [`crate::lean`]); returns the version it replaced.
    pub fn applied(&mut self, object: DynamicObject) -> Option<Arc<DynamicObject>> {
        let (Some(namespace), Some(name)) = (
            object.metadata.namespace.clone(),
            object.metadata.name.clone(),
        ) else {
            return None;
        };
        let objects = self.relisting.as_mut().unwrap_or(&mut self.current);
        objects
            .entry(namespace)
            .or_default()
            .insert(name, Arc::new(object))
    }

    pub fn deleted(&mut self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        let objects = self.current.get_mut(namespace)?;
        let gone = objects.remove(name);
        if objects.is_empty() {
            self.current.remove(namespace);
        }
        gone
    }

    /// The objects `reference` selects in `namespace`, by name.
    pub fn selected<'a>(
        &'a self,
        namespace: &str,
        reference: &'a Reference,
    ) -> impl Iterator<Item = &'a Arc<DynamicObject>> + 'a {
        let objects = self.current.get(namespace);
        let by_name = reference
            .name
            .as_ref()
            .map(|name| objects.and_then(|objects| objects.get(name)));
        let all = match by_name {
            Some(_) => None,
            None => objects.map(|objects| objects.values()),
        };
        by_name
            .flatten()
            .into_iter()
            .chain(all.into_iter().flatten())
            .filter(move |object| selects(reference, object))
    }
}
