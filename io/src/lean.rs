//! Objects as the watches and the controller's requests decode them: a [`DynamicObject`] (or a
//! metadata watch's `PartialObjectMeta`) without its `managedFields`.
//!
//! kube's `DynamicObject` flattens both its type and its data into itself, so serde first buffers
//! each object into an intermediate tree of its own and only then builds the object from that
//! tree; and its `ObjectMeta` keeps `managedFields`, which the controller never reads and which
//! are often half of an object's bytes (a tree of small maps for each writer). Each event of a
//! watch is decoded once per object and thrown away: at the API server's ceiling that decoding
//! was the controller's main cost (docs/benchmarks/envelope.md). Hand-written because
//! serde has no way to skip a field of a foreign type: `ObjectMeta`'s own decoder reads the
//! metadata, through a map that leaves `managedFields` out, so every other field is decoded
//! exactly as kube decodes it.
//!
//! An object is first read as text and weighed ([`LeanText`], `lean/text.rs`: a watch decodes
//! it only once its owner has room for it), then decoded within [`OBJECT_BYTES`] of what it
//! holds (`kube_retention_runtime::held::Within`): a tree of small maps holds a hundred times its
//! text, and a map of labels twenty, so one object of etcd's 1.5 MiB could take 170 MiB
//! decoded, and a tenant may write such objects of any kind it may create. Past the bound the
//! object comes with its identity (name, namespace, uid, resource version) and no data
//! ([`past_bound`]): the controller cannot judge it, so it never deletes it, and counts it
//! (`kube_retention_objects_past_bound_total`). [`LeanObject`], a request's answer, is decoded
//! the same way at once.

mod text;

use std::borrow::Cow;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use serde::de::Deserializer;

pub use text::{Decoded, LeanMetaText, LeanText};

/// The metadata field the controller never reads, left undecoded.
pub(crate) const SKIPPED: &str = "managedFields";

/// The most an object may hold decoded, metadata and data ([`past_bound`] past it): 16 MiB, some
/// ten times the text of the largest object etcd stores, where it is of usual JSON.
pub const OBJECT_BYTES: usize = 16 * 1024 * 1024;

/// Whether `object`, of an object watch or list ([`LeanText`], [`LeanObject`]), held more than
/// [`OBJECT_BYTES`] decoded and came with its identity alone and no data: not to be judged. (A
/// metadata watch's object past the bound is a [`Decoded::PastBound`].)
pub fn past_bound(object: &DynamicObject) -> bool {
    object.data.is_null()
}

/// `Resource` for a wrapper of an object decoded through the API of an [`ApiResource`], as
/// `DynamicObject` has it; `metadata_api`: requested as metadata only; `$metadata`: the wrapped
/// value's field the object's metadata is.
macro_rules! resource_of_dynamic {
    ($wrapper:ty, $metadata_api:expr, $metadata:ident) => {
        impl Resource for $wrapper {
            type DynamicType = ApiResource;
            type Scope = DynamicResourceScope;

            fn metadata_api() -> bool {
                $metadata_api
            }

            fn group(resource: &ApiResource) -> Cow<'_, str> {
                DynamicObject::group(resource)
            }

            fn version(resource: &ApiResource) -> Cow<'_, str> {
                DynamicObject::version(resource)
            }

            fn kind(resource: &ApiResource) -> Cow<'_, str> {
                DynamicObject::kind(resource)
            }

            fn api_version(resource: &ApiResource) -> Cow<'_, str> {
                DynamicObject::api_version(resource)
            }

            fn plural(resource: &ApiResource) -> Cow<'_, str> {
                DynamicObject::plural(resource)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.0.$metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.$metadata
            }
        }
    };
}

/// A [`DynamicObject`] decoded without its `managedFields` at once (see the module): a request's
/// answer.
#[derive(Clone, Debug)]
pub struct LeanObject(pub DynamicObject);

resource_of_dynamic!(LeanObject, false, metadata);
resource_of_dynamic!(LeanText, false, identity);
resource_of_dynamic!(LeanMetaText, true, identity);

impl<'de> Deserialize<'de> for LeanObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        LeanText::deserialize(deserializer).map(|text| LeanObject(text.decode()))
    }
}

/// What a watch's `event` holds: its object's `held`, or nothing.
pub fn event_held<T>(event: &Event<T>, held: impl Fn(&T) -> usize) -> usize {
    match event {
        Event::Apply(object) | Event::InitApply(object) | Event::Delete(object) => held(object),
        Event::Init | Event::InitDone => 0,
    }
}

/// A watch's `event` with its object made another by `make` (decoded, unwrapped).
pub fn event_map<T, U>(event: Event<T>, make: impl FnOnce(T) -> U) -> Event<U> {
    match event {
        Event::Apply(object) => Event::Apply(make(object)),
        Event::Delete(object) => Event::Delete(make(object)),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(make(object)),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use kube_retention_runtime::held::held_bytes;
    use serde_json::Value;

    use super::*;

    /// A Job of `entries` one-entry maps in its spec.
    fn dense_job(entries: usize) -> String {
        let env = vec![r#"{"name":"E"}"#; entries].join(",");
        format!(
            r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"dense","namespace":"tenant","uid":"u-1","resourceVersion":"9","managedFields":[{{"manager":"kubectl"}}]}},"spec":{{"template":{{"spec":{{"containers":[{{"name":"c","env":[{env}]}}]}}}}}},"status":{{"succeeded":1}}}}"#
        )
    }

    /// What the object's data holds decoded, as [`OBJECT_BYTES`] counts it.
    fn data_held(text: &str) -> usize {
        let mut value: Value = serde_json::from_str(text).unwrap();
        let fields = value.as_object_mut().unwrap();
        for part in ["apiVersion", "kind", "metadata"] {
            fields.remove(part);
        }
        held_bytes(&value)
    }

    #[test]
    fn an_object_whose_data_holds_more_than_its_bound_comes_with_its_identity_alone() {
        // Some 280 KB of text: past 16 MiB decoded.
        let text = dense_job(24_000);
        assert!(data_held(&text) > OBJECT_BYTES);
        let LeanObject(object) = serde_json::from_str(&text).unwrap();
        assert!(past_bound(&object));
        assert_eq!(object.metadata.name.as_deref(), Some("dense"));
        assert_eq!(object.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(object.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(object.types.unwrap().kind, "Job");
        // Its metadata alone, as a metadata watch reads it, is unaffected.
        let meta: LeanMetaText = serde_json::from_str(&text).unwrap();
        let Decoded::Whole(meta) = meta.decode() else {
            panic!("within the bound");
        };
        assert_eq!(meta.metadata.name.as_deref(), Some("dense"));
    }

    /// A ConfigMap of `labels` labels of a few bytes each.
    fn labelled(labels: usize) -> String {
        let labels: Vec<String> = (0..labels).map(|n| format!(r#""{n:x}":"""#)).collect();
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"labelled","namespace":"tenant","uid":"u-2","resourceVersion":"4","labels":{{{}}}}},"data":{{"a":"b"}}}}"#,
            labels.join(",")
        )
    }

    #[test]
    fn an_object_whose_metadata_holds_more_than_its_bound_comes_with_its_identity_alone() {
        // Some 1 MB of labels, within what etcd stores: past 16 MiB decoded.
        let text = labelled(120_000);
        assert!(text.len() < 1_500_000);
        let LeanObject(object) = serde_json::from_str(&text).unwrap();
        assert!(past_bound(&object));
        assert_eq!(object.metadata.name.as_deref(), Some("labelled"));
        assert_eq!(object.metadata.namespace.as_deref(), Some("tenant"));
        assert_eq!(object.metadata.uid.as_deref(), Some("u-2"));
        assert_eq!(object.metadata.resource_version.as_deref(), Some("4"));
        assert_eq!(object.metadata.labels, None);
        let meta: LeanMetaText = serde_json::from_str(&text).unwrap();
        assert!(meta.held() > OBJECT_BYTES);
        let Decoded::PastBound(identity) = meta.decode() else {
            panic!("past the bound");
        };
        assert_eq!(identity.metadata.name.as_deref(), Some("labelled"));
        assert_eq!(identity.metadata.labels, None);
        // A tenth of them fits.
        let LeanObject(object) = serde_json::from_str(&labelled(12_000)).unwrap();
        assert!(!past_bound(&object));
        assert_eq!(
            object.metadata.labels.map(|labels| labels.len()),
            Some(12_000)
        );
    }

    /// A custom resource whose free-form spec, and so its `managedFields`, nest `depth` deep, in
    /// a page of a list, beside a shallow one.
    fn deep_page(depth: usize) -> String {
        let deep = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        let object = |name: &str, spec: &str| {
            format!(
                r#"{{"apiVersion":"build.openshift.io/v1","kind":"Build","metadata":{{"name":"{name}","namespace":"tenant","managedFields":[{{"fieldsV1":{spec}}}]}},"spec":{spec}}}"#
            )
        };
        format!(
            r#"{{"apiVersion":"build.openshift.io/v1","kind":"BuildList","metadata":{{}},"items":[{},{}]}}"#,
            object("deep", &deep),
            object("shallow", r#"{"a":1}"#)
        )
    }

    #[test]
    fn an_object_nested_deeper_than_decoded_comes_with_its_metadata_alone_not_an_error() {
        let page = deep_page(300);
        // Decoded whole, the page fails: the list of the kind with it, for every namespace.
        assert!(serde_json::from_str::<kube::core::ObjectList<DynamicObject>>(&page).is_err());
        let list: kube::core::ObjectList<LeanObject> = serde_json::from_str(&page).unwrap();
        let [LeanObject(deep), LeanObject(shallow)] = &list.items[..] else {
            panic!("two items");
        };
        assert!(past_bound(deep));
        assert_eq!(deep.metadata.name.as_deref(), Some("deep"));
        assert!(!past_bound(shallow));
        assert_eq!(shallow.data["spec"], serde_json::json!({"a": 1}));
        let list: kube::core::ObjectList<LeanMetaText> = serde_json::from_str(&page).unwrap();
        let names: Vec<_> = list
            .items
            .into_iter()
            .map(|meta| match meta.decode() {
                Decoded::Whole(meta) => meta.metadata.name.unwrap(),
                Decoded::PastBound(_) => panic!("within the bound"),
            })
            .collect();
        assert_eq!(names, ["deep", "shallow"]);
    }

    #[test]
    fn an_object_within_its_bound_comes_whole() {
        let text = dense_job(1_000);
        assert!(data_held(&text) < OBJECT_BYTES);
        let LeanObject(object) = serde_json::from_str(&text).unwrap();
        assert!(!past_bound(&object));
        let whole: DynamicObject = serde_json::from_str(&text).unwrap();
        assert_eq!(object.data, whole.data);
    }
}
