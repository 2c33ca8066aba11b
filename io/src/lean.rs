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

use std::borrow::Cow;
use std::fmt;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, PartialObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The metadata field the controller never reads, left undecoded.
const SKIPPED: &str = "managedFields";

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
            data: Value::Object(data),
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
/// or none), its metadata, and the rest.
struct Parts {
    types: Option<TypeMeta>,
    metadata: ObjectMeta,
    data: Map<String, Value>,
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
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value_seed(MetadataSeed)?),
                _ if self.data => {
                    let value = map.next_value::<Value>()?;
                    data.insert(key, value);
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
            data,
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
