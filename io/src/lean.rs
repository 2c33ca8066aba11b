//! Objects as the watches decode them: a [`DynamicObject`] (or a metadata watch's
//! [`PartialObjectMeta`]) without its `managedFields`, decoded in one pass.
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
//! The rest of an object, its data, is decoded within [`OBJECT_BYTES`] of what it holds
//! (`kube_retention_runtime::held::Within`): a tree of small maps holds a hundred times its
//! text, so one object of etcd's 1.5 MiB could take 170 MiB decoded, and a tenant may write such
//! objects of any kind it may create. Past the bound the rest is read past, and the object comes
//! with its metadata and no data ([`past_bound`]): the controller cannot judge it, so it never
//! deletes it, and counts it (`kube_retention_objects_past_bound_total`).

use std::borrow::Cow;
use std::fmt;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, PartialObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::Event;
use kube_retention_runtime::held::{Budget, Within};
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The metadata field the controller never reads, left undecoded.
pub(crate) const SKIPPED: &str = "managedFields";

/// The most an object's data may hold decoded ([`past_bound`] past it): 16 MiB, some ten times
/// the text of the largest object etcd stores, where it is of usual JSON.
pub const OBJECT_BYTES: usize = 16 * 1024 * 1024;

/// Whether `object`, of an object watch or list ([`LeanObject`]), held more than
/// [`OBJECT_BYTES`] decoded and came without its data: not to be judged. (An object of a
/// metadata watch, [`LeanMeta`], has no data either: ask this of object watches' only.)
pub fn past_bound(object: &DynamicObject) -> bool {
    object.data.is_null()
}

/// `Resource` for a wrapper of an object decoded through the API of an [`ApiResource`], as
/// `DynamicObject` has it; `metadata_api`: requested as metadata only.
macro_rules! resource_of_dynamic {
    ($wrapper:ty, $metadata_api:expr) => {
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
                &self.0.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}

/// A [`DynamicObject`] decoded without its `managedFields` (see the module).
#[derive(Clone, Debug)]
pub struct LeanObject(pub DynamicObject);

resource_of_dynamic!(LeanObject, false);

/// A metadata watch's [`PartialObjectMeta`] decoded without its `managedFields`.
#[derive(Clone, Debug)]
pub struct LeanMeta(pub PartialObjectMeta<DynamicObject>);

resource_of_dynamic!(LeanMeta, true);

impl<'de> Deserialize<'de> for LeanObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Parts {
            types,
            metadata,
            data,
        } = deserializer.deserialize_map(PartsVisitor { data: true })?;
        Ok(LeanObject(DynamicObject {
            types,
            metadata,
            data: data.map_or(Value::Null, Value::Object),
        }))
    }
}

impl<'de> Deserialize<'de> for LeanMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Parts {
            types, metadata, ..
        } = deserializer.deserialize_map(PartsVisitor { data: false })?;
        Ok(LeanMeta(PartialObjectMeta {
            types,
            metadata,
            _phantom: std::marker::PhantomData,
        }))
    }
}

/// An object's parts: its type (as `DynamicObject`'s flattened `Option<TypeMeta>`: both fields
/// or none), its metadata, and the rest, if it held at most [`OBJECT_BYTES`].
struct Parts {
    types: Option<TypeMeta>,
    metadata: ObjectMeta,
    data: Option<Map<String, Value>>,
}

/// Reads an object's parts; the rest is read past, not kept, unless `data`.
struct PartsVisitor {
    data: bool,
}

impl<'de> Visitor<'de> for PartsVisitor {
    type Value = Parts;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parts, A::Error> {
        let (mut api_version, mut kind, mut metadata) = (None, None, None);
        let mut data = Map::new();
        let budget = Budget::new(OBJECT_BYTES);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value_seed(MetadataSeed)?),
                _ if self.data => {
                    let value = map.next_value_seed(Within::new(&budget))?;
                    if budget.entry(&key, data.len()) {
                        data.insert(key, value);
                    } else {
                        data = Map::new();
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Parts {
            types: api_version
                .zip(kind)
                .map(|(api_version, kind)| TypeMeta { api_version, kind }),
            metadata: metadata.unwrap_or_default(),
            data: (!budget.exceeded()).then_some(data),
        })
    }
}

/// Decodes `ObjectMeta` with its own decoder, from the metadata less `managedFields`.
struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = ObjectMeta;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ObjectMeta, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = ObjectMeta;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectMeta, A::Error> {
        ObjectMeta::deserialize(MapAccessDeserializer::new(Skipping(map)))
    }
}

/// A map that leaves out [`SKIPPED`], its value read past without being kept.
struct Skipping<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Skipping<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.0.next_key::<String>()? {
            if key == SKIPPED {
                self.0.next_value::<IgnoredAny>()?;
                continue;
            }
            return seed
                .deserialize(StringDeserializer::<A::Error>::new(key))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl From<LeanObject> for DynamicObject {
    fn from(LeanObject(object): LeanObject) -> Self {
        object
    }
}

impl From<LeanMeta> for PartialObjectMeta<DynamicObject> {
    fn from(LeanMeta(metadata): LeanMeta) -> Self {
        metadata
    }
}

/// An object of a metadata watch as a [`DynamicObject`] without a body (a Cleaner's targets
/// that no condition reads).
impl From<LeanMeta> for DynamicObject {
    fn from(LeanMeta(metadata): LeanMeta) -> Self {
        DynamicObject {
            types: metadata.types,
            metadata: metadata.metadata,
            data: Value::Null,
        }
    }
}

/// A watch's `event` with each object unwrapped from the type it was decoded as.
pub fn unwrapped<L, K: From<L>>(event: Event<L>) -> Event<K> {
    match event {
        Event::Apply(object) => Event::Apply(object.into()),
        Event::Delete(object) => Event::Delete(object.into()),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(object.into()),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use kube_retention_runtime::held::held_bytes;

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
    fn an_object_whose_data_holds_more_than_its_bound_comes_with_its_metadata_alone() {
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
        let LeanMeta(meta) = serde_json::from_str(&text).unwrap();
        assert_eq!(meta.metadata.name.as_deref(), Some("dense"));
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
        let list: kube::core::ObjectList<LeanMeta> = serde_json::from_str(&page).unwrap();
        assert_eq!(list.items.len(), 2);
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
