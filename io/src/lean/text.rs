//! Objects of watches and lists read as text, and decoded only once there is room for them:
//! [`LeanText`] (an object watch's) and [`LeanMetaText`] (a metadata watch's).
//!
//! A watch hands its owner's loop what it decoded within a room every watch of that owner
//! shares (`crate::watch_set`). Decoded before taking that room, each watch held an object of
//! up to [`OBJECT_BYTES`] while it waited for it, and an owner has many watches: a tenant
//! whose Cleaners watch sixteen kinds of its namespace made the controller hold sixteen objects
//! just within the bound of one at once, past its share of memory. So a watch first reads each
//! object as far as it must to follow the watch (its type, the name, namespace, uid and
//! resource version of its metadata) and weighs the rest from its text, keeping that as text;
//! then takes room for what the object will hold decoded; and only then decodes it
//! ([`LeanText::decode`]). Waiting, a watch holds the text of one object, which the API server
//! bounds (etcd's 1.5 MiB), not what its decoding would, which a tenant chooses (a label of 9
//! bytes holds some 175 decoded, a map of one entry some 650).
//!
//! The weight is what `kube_retention_runtime::held::object_held_bytes` says of the object
//! decoded, read from the text (`held::field_weigher`, [`Weighed`]): never less. An object that
//! would hold more than [`OBJECT_BYTES`], metadata and data together, is not decoded: it comes
//! with its identity alone, and no data ([`super::past_bound`]); nor is one whose metadata does
//! not decode. Both are not judged, so never deleted.
//!
//! Hand-written: serde reads an object's fields one after another and has no way to keep some as
//! text and weigh them before the rest is read. `RawValue` keeps a field's text exactly, so what
//! is decoded later is what serde_json would have decoded then; it needs serde_json's own
//! decoder underneath, which kube's watches and lists are (a watch event's `type` comes before
//! its `object`, as the API server writes it).

use std::fmt;

use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta, TypeMeta};
use kube_retention_runtime::held::{Budget, Weighed, Within, allocation, field_weigher, map_bytes};
use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{OBJECT_BYTES, SKIPPED};
use crate::watch_set::Ready;

/// An object of an object watch or list, read as text and weighed; [`LeanText::decode`] it once
/// there is room for what it holds decoded ([`LeanText::held`]).
#[derive(Clone, Debug)]
pub struct LeanText(pub(super) Read);

/// A metadata watch's object, read as text and weighed; [`LeanMetaText::decode`] it once there
/// is room for what it holds decoded ([`LeanMetaText::held`]).
#[derive(Clone, Debug)]
pub struct LeanMetaText(pub(super) Read);

/// An object read as far as a watch must, the rest kept as text (see the module).
#[derive(Clone, Debug)]
pub(super) struct Read {
    types: Option<TypeMeta>,
    /// The metadata's name, namespace, uid and resource version: what a watch follows an
    /// object by, and all an object past the bound comes with.
    pub(super) identity: ObjectMeta,
    /// The metadata's fields `ObjectMeta` has, less `managedFields` ([`super::SKIPPED`]), as
    /// text.
    metadata: Vec<(&'static str, Box<RawValue>)>,
    /// The object's other fields, an object watch's only.
    rest: Vec<(String, Box<RawValue>)>,
    /// What the object holds decoded, metadata and data; its own struct is its holder's.
    held: usize,
}

/// An object decoded: whole, or past the bound (or where its metadata does not decode) its
/// identity alone, not to be judged.
#[derive(Clone, Debug)]
pub enum Decoded<T> {
    Whole(T),
    PastBound(T),
}

impl<T> Decoded<T> {
    /// The object made another by `make`, as whole or past the bound as it was.
    pub fn map<U>(self, make: impl FnOnce(T) -> U) -> Decoded<U> {
        match self {
            Decoded::Whole(object) => Decoded::Whole(make(object)),
            Decoded::PastBound(object) => Decoded::PastBound(make(object)),
        }
    }

    /// The object, whole or its identity alone.
    pub fn into_inner(self) -> T {
        match self {
            Decoded::Whole(object) | Decoded::PastBound(object) => object,
        }
    }
}

impl LeanText {
    /// At least what [`LeanText::decode`] holds (`object_held_bytes` of it).
    pub fn held(&self) -> usize {
        std::mem::size_of::<DynamicObject>().saturating_add(self.0.held)
    }

    /// The object, decoded lean (`managedFields` left out); past the bound, its identity alone
    /// and no data ([`super::past_bound`]).
    pub fn decode(self) -> DynamicObject {
        self.decode_within(OBJECT_BYTES)
    }

    /// [`LeanText::decode`], saying whether the object came whole.
    pub fn decode_judged(self) -> Decoded<DynamicObject> {
        let object = self.decode();
        match super::past_bound(&object) {
            true => Decoded::PastBound(object),
            false => Decoded::Whole(object),
        }
    }

    /// As [`LeanText::decode`], within `bytes` in place of [`OBJECT_BYTES`].
    pub(crate) fn decode_within(self, bytes: usize) -> DynamicObject {
        let (types, metadata, data) = self.0.decode(bytes);
        DynamicObject {
            types,
            metadata,
            data: data.map_or(Value::Null, Value::Object),
        }
    }
}

impl LeanMetaText {
    /// At least what [`LeanMetaText::decode`] holds.
    pub fn held(&self) -> usize {
        std::mem::size_of::<PartialObjectMeta<DynamicObject>>().saturating_add(self.0.held)
    }

    /// The object's metadata, decoded lean; past the bound, its identity alone.
    pub fn decode(self) -> Decoded<PartialObjectMeta<DynamicObject>> {
        self.decode_within(OBJECT_BYTES)
    }

    /// As [`LeanMetaText::decode`], within `bytes` in place of [`OBJECT_BYTES`].
    pub(crate) fn decode_within(self, bytes: usize) -> Decoded<PartialObjectMeta<DynamicObject>> {
        let (types, metadata, data) = self.0.decode(bytes);
        let decoded = PartialObjectMeta {
            types,
            metadata,
            _phantom: std::marker::PhantomData,
        };
        // A metadata watch's object has no data: it comes without only past the bound.
        match data {
            Some(_) => Decoded::Whole(decoded),
            None => Decoded::PastBound(decoded),
        }
    }
}

impl Read {
    /// Its type, metadata and data (the rest, as a map), or, past `bytes` or where the metadata
    /// does not decode, its type, identity and no data.
    fn decode(self, bytes: usize) -> (Option<TypeMeta>, ObjectMeta, Option<Map<String, Value>>) {
        let Read {
            types,
            identity,
            metadata,
            rest,
            held,
        } = self;
        if held > bytes {
            return (types, identity, None);
        }
        let fields = MapAccessDeserializer::new(Fields::new(&metadata));
        let Ok(metadata) = ObjectMeta::deserialize(fields) else {
            return (types, identity, None);
        };
        // Weighed, the data fits; the budget still bounds it, and refuses what lies too deep.
        let budget = Budget::new(bytes);
        let mut data = Map::new();
        for (key, text) in rest {
            let Ok(value) = Within::new(&budget).deserialize(&mut text_of(&text)) else {
                return (types, metadata, None);
            };
            if !budget.entry(&key, data.len()) {
                break;
            }
            data.insert(key, value);
        }
        (types, metadata, (!budget.exceeded()).then_some(data))
    }
}

/// A field's text, to decode.
fn text_of(text: &RawValue) -> serde_json::Deserializer<serde_json::de::StrRead<'_>> {
    serde_json::Deserializer::from_str(text.get())
}

/// An object fetched on the way to a loop (not by a watch): decoded once there is room for it.
impl Ready for LeanText {
    type Event = DynamicObject;

    fn will_hold(&self) -> usize {
        self.held()
    }

    fn ready(self) -> DynamicObject {
        self.decode()
    }
}

impl<'de> Deserialize<'de> for LeanText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(ReadVisitor { rest: true })
            .map(LeanText)
    }
}

impl<'de> Deserialize<'de> for LeanMetaText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(ReadVisitor { rest: false })
            .map(LeanMetaText)
    }
}

/// Reads an object's type, its metadata as text, and, where `rest`, its other fields as text;
/// then weighs them.
struct ReadVisitor {
    rest: bool,
}

impl<'de> Visitor<'de> for ReadVisitor {
    type Value = Read;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
        let (mut api_version, mut kind) = (None, None);
        let mut metadata = MetadataRead::default();
        let mut rest: Vec<(String, Box<RawValue>)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = map.next_value_seed(MetadataSeed)?,
                _ if self.rest => rest.push((key, map.next_value()?)),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let types = api_version
            .zip(kind)
            .map(|(api_version, kind)| TypeMeta { api_version, kind });
        let mut data_held = map_bytes(rest.len());
        for (key, text) in &rest {
            let value = Weighed::default()
                .deserialize(&mut text_of(text))
                .map_err(A::Error::custom)?;
            data_held = data_held
                .saturating_add(allocation(key.len()))
                .saturating_add(value);
        }
        let types_held = types.as_ref().map_or(0, |types| {
            allocation(types.api_version.len()).saturating_add(allocation(types.kind.len()))
        });
        Ok(Read {
            types,
            identity: metadata.identity,
            metadata: metadata.fields,
            rest,
            held: types_held
                .saturating_add(metadata.held)
                .saturating_add(data_held),
        })
    }
}

/// An object's metadata read as text: its identity, its fields less `managedFields`, and what
/// they hold decoded (`kube_retention_runtime::held::field_weigher`).
#[derive(Default)]
struct MetadataRead {
    identity: ObjectMeta,
    fields: Vec<(&'static str, Box<RawValue>)>,
    held: usize,
}

/// Reads an object's metadata as text ([`MetadataRead`]).
struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = MetadataRead;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<MetadataRead, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed {
    type Value = MetadataRead;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetadataRead, A::Error> {
        let mut read = MetadataRead::default();
        while let Some(key) = map.next_key_seed(MetadataField)? {
            // Fields `ObjectMeta` does not have, and those lean decoding leaves out.
            let Some(key) = key.filter(|key| *key != SKIPPED) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let text: Box<RawValue> = map.next_value()?;
            if let Some(weigher) = field_weigher(key) {
                let held = weigher.deserialize(&mut text_of(&text));
                read.held = read.held.saturating_add(held.map_err(A::Error::custom)?);
            }
            let identity = &mut read.identity;
            let part = match key {
                "name" => Some(&mut identity.name),
                "namespace" => Some(&mut identity.namespace),
                "uid" => Some(&mut identity.uid),
                "resourceVersion" => Some(&mut identity.resource_version),
                _ => None,
            };
            if let Some(part) = part {
                *part =
                    Option::<String>::deserialize(&mut text_of(&text)).map_err(A::Error::custom)?;
            }
            read.fields.push((key, text));
        }
        Ok(read)
    }
}

/// The fields of `ObjectMeta` (`meta.k8s.io/v1`), as its decoder names them.
const METADATA_FIELDS: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// A metadata field's name, as one of [`METADATA_FIELDS`]: `None` for any other, which
/// `ObjectMeta`'s decoder reads past.
struct MetadataField;

impl<'de> DeserializeSeed<'de> for MetadataField {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for MetadataField {
    type Value = Option<&'static str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a field's name")
    }

    fn visit_str<E>(self, field: &str) -> Result<Self::Value, E> {
        Ok(METADATA_FIELDS.into_iter().find(|known| *known == field))
    }
}

/// An object's metadata fields read as text, as a map `ObjectMeta`'s decoder reads.
struct Fields<'a> {
    fields: std::slice::Iter<'a, (&'static str, Box<RawValue>)>,
    value: Option<&'a RawValue>,
}

impl<'a> Fields<'a> {
    fn new(fields: &'a [(&'static str, Box<RawValue>)]) -> Self {
        Self {
            fields: fields.iter(),
            value: None,
        }
    }
}

impl<'a> MapAccess<'a> for Fields<'a> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.fields.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::<Self::Error>::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| Self::Error::custom("a value asked for before its key"))?;
        seed.deserialize(&mut text_of(value))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.fields.len())
    }
}

#[cfg(test)]
mod tests {
    use kube_retention_runtime::held::object_held_bytes;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::lean::past_bound;

    /// JSON of every shape: scalars, strings with escapes, arrays and maps of any size, nested.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|number| Value::Number(number.into())),
            "[a-zé\"\\\\\n ]{0,20}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 200, 12, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,6}", inner, 0..12)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    /// An object as the API server sends it: a type (or none, as a list's item), metadata with
    /// each part lean decoding keeps and `managedFields`, and data of any shape.
    fn object() -> impl Strategy<Value = Value> {
        let texts = || prop::collection::btree_map("[a-z0-9./-]{1,12}", "\\PC{0,12}", 0..30);
        let owner = ("[a-z]{1,12}", "[a-z0-9-]{1,20}").prop_map(|(kind, name)| {
            json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": "u", "controller": true})
        });
        (
            any::<bool>(),
            prop::option::of(texts()),
            prop::option::of(texts()),
            prop::option::of(prop::collection::vec("[a-z./-]{1,20}", 0..10)),
            prop::option::of(prop::collection::vec(owner, 0..5)),
            prop::collection::btree_map("[a-z]{1,8}", json(), 0..6),
        )
            .prop_map(|(typed, labels, annotations, finalizers, owners, data)| {
                let mut object = json!({
                    "metadata": {
                        "name": "job-1", "namespace": "tenant", "uid": "u-1",
                        "resourceVersion": "7", "generation": 2,
                        "creationTimestamp": "2026-12-07T10:00:00Z",
                        "labels": labels, "annotations": annotations,
                        "finalizers": finalizers, "ownerReferences": owners,
                        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                    },
                });
                let fields = object.as_object_mut().unwrap();
                if typed {
                    fields.insert("apiVersion".into(), json!("example.com/v1"));
                    fields.insert("kind".into(), json!("Run"));
                }
                for (key, value) in data {
                    if !["apiVersion", "kind", "metadata"].contains(&key.as_str()) {
                        fields.insert(key, value);
                    }
                }
                object
            })
    }

    /// kube's own decoding of `value`, less `managedFields`.
    fn kube_decodes(value: &Value) -> DynamicObject {
        let mut object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
        object.metadata.managed_fields = None;
        object
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// Read as text, an object weighs what it holds decoded, and decodes, within a bound
        /// of that, to what kube decodes less `managedFields`; within any less, to its
        /// identity alone. Its metadata alone likewise.
        #[test]
        fn an_object_read_as_text_weighs_and_decodes_as_it_is_held(
            value in object(),
            short in 1usize..10_000,
        ) {
            let text = value.to_string();
            let whole = kube_decodes(&value);
            let read: LeanText = serde_json::from_str(&text).unwrap();
            let held = read.held();
            prop_assert_eq!(held, object_held_bytes(&whole));
            prop_assert_eq!(read.clone().decode(), whole.clone());
            prop_assert_eq!(read.clone().decode_within(read.0.held), whole.clone());
            let within = read.0.held.saturating_sub(short);
            let identity = read.decode_within(within);
            prop_assert!(past_bound(&identity));
            prop_assert_eq!(identity.metadata, ObjectMeta {
                name: Some("job-1".into()),
                namespace: Some("tenant".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            });
            prop_assert_eq!(identity.types, whole.types.clone());

            let meta: LeanMetaText = serde_json::from_str(&text).unwrap();
            let Decoded::Whole(decoded) = meta.clone().decode() else {
                return Err(TestCaseError::fail("within the bound"));
            };
            prop_assert_eq!(&decoded.metadata, &whole.metadata);
            let expected = std::mem::size_of::<PartialObjectMeta<DynamicObject>>()
                + object_held_bytes(&DynamicObject { data: Value::Null, ..whole.clone() })
                - std::mem::size_of::<DynamicObject>();
            prop_assert_eq!(meta.held(), expected);
            let within = meta.0.held.saturating_sub(short);
            let Decoded::PastBound(identity) = meta.decode_within(within) else {
                return Err(TestCaseError::fail("past the bound"));
            };
            prop_assert_eq!(identity.metadata.name.as_deref(), Some("job-1"));
            prop_assert_eq!(identity.metadata.labels, None);
        }
    }

    #[test]
    fn metadata_that_does_not_decode_comes_with_its_identity_alone() {
        // A time the weighing reads past and `ObjectMeta` refuses.
        let text = r#"{"metadata":{"name":"odd","creationTimestamp":"yesterday"},"spec":{}}"#;
        let read: LeanText = serde_json::from_str(text).unwrap();
        let object = read.decode();
        assert!(past_bound(&object));
        assert_eq!(object.metadata.name.as_deref(), Some("odd"));
        let meta: LeanMetaText = serde_json::from_str(text).unwrap();
        assert!(matches!(meta.decode(), Decoded::PastBound(_)));
    }

    #[test]
    fn a_watch_event_read_as_text_follows_the_object_by_its_identity() {
        let line = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"t","uid":"u","resourceVersion":"42","labels":{"x":"y"}},"data":{"k":"v"}}}"#;
        let kube::core::WatchEvent::Modified(read) =
            serde_json::from_str::<kube::core::WatchEvent<LeanText>>(line).unwrap()
        else {
            panic!("a change");
        };
        use kube::ResourceExt;
        assert_eq!(read.resource_version().as_deref(), Some("42"));
        assert_eq!(read.name_any(), "a");
        let object = read.decode();
        assert_eq!(object.data, json!({"data": {"k": "v"}}));
        assert_eq!(object.labels()["x"], "y");
    }
}
