//! An object's metadata weighed from its text, field by field ([`field_weigher`]): what
//! [`super::metadata_held_bytes`] says of the `ObjectMeta` that text decodes to, read without
//! decoding or keeping any of it. The value weighers ([`super::Weighed`]) weigh a tree of JSON
//! values; metadata decodes to texts, maps of texts and lists of them instead, which hold less,
//! and its labels are the one part of an object the API server bounds by no size of its own: a
//! label of 9 bytes of text holds some 175 in a `BTreeMap<String, String>`, so an object of
//! etcd's 1.5 MiB of labels holds some 30 MiB decoded. Weighed first, such metadata is decoded
//! only where there is room for it (`io/src/lean/text.rs`).
//!
//! A field given twice is weighed twice, though the decoded metadata keeps it once; fields
//! `ObjectMeta` has no text, map or list for (times, counts, `managedFields`, which lean decoding
//! leaves out) weigh nothing, as there. A value of a type `ObjectMeta` would refuse is refused
//! here too, except `null`, which weighs nothing.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{STRING, allocation, nodes_bytes, slots_bytes};

/// What weighs the metadata field `field`, as [`super::metadata_held_bytes`] weighs it decoded:
/// `None` for a field that holds nothing beyond the metadata's struct (times, counts,
/// `managedFields`, which lean decoding leaves out, and fields `ObjectMeta` does not have).
pub fn field_weigher(field: &str) -> Option<FieldWeigher> {
    let weigher = match field {
        "name" | "namespace" | "generateName" | "uid" | "resourceVersion" | "selfLink" => {
            FieldWeigher::Text
        }
        "labels" | "annotations" => FieldWeigher::Texts(Texts::Map),
        "finalizers" => FieldWeigher::Texts(Texts::List),
        "ownerReferences" => FieldWeigher::Owners,
        _ => return None,
    };
    Some(weigher)
}

/// Weighs one field of an object's metadata ([`field_weigher`]).
#[derive(Clone, Copy, Debug)]
pub enum FieldWeigher {
    Text,
    Texts(Texts),
    Owners,
}

impl<'de> DeserializeSeed<'de> for FieldWeigher {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        match self {
            FieldWeigher::Text => Text.deserialize(deserializer),
            FieldWeigher::Texts(texts) => texts.deserialize(deserializer),
            FieldWeigher::Owners => Owners.deserialize(deserializer),
        }
    }
}

/// A text, weighed as its allocation.
#[derive(Clone, Copy)]
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E>(self, text: &str) -> Result<usize, E> {
        Ok(allocation(text.len()))
    }
}

/// Texts kept together: a map of them (labels, annotations) or a list (finalizers).
#[derive(Clone, Copy, Debug)]
pub enum Texts {
    Map,
    List,
}

impl<'de> DeserializeSeed<'de> for Texts {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Texts {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(match self {
            Texts::Map => "a map of strings",
            Texts::List => "a list of strings",
        })
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<usize, A::Error> {
        if let Texts::List = self {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Map,
                &self,
            ));
        }
        let (mut count, mut bytes) = (0usize, 0usize);
        while let Some(key) = entries.next_key_seed(Text)? {
            let value = entries.next_value_seed(Text)?;
            count += 1;
            bytes = bytes.saturating_add(key).saturating_add(value);
        }
        Ok(bytes.saturating_add(nodes_bytes(count, STRING)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<usize, A::Error> {
        if let Texts::Map = self {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Seq,
                &self,
            ));
        }
        let (mut count, mut bytes) = (0usize, 0usize);
        while let Some(item) = items.next_element_seed(Text)? {
            count += 1;
            bytes = bytes.saturating_add(item);
        }
        Ok(bytes.saturating_add(slots_bytes(count, STRING)))
    }
}

/// `ownerReferences`: the list, and each owner's four texts.
#[derive(Clone, Copy)]
struct Owners;

impl<'de> DeserializeSeed<'de> for Owners {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Owners {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a list of owner references")
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut owners: A) -> Result<usize, A::Error> {
        let (mut count, mut bytes) = (0usize, 0usize);
        while let Some(owner) = owners.next_element_seed(Owner)? {
            count += 1;
            bytes = bytes.saturating_add(owner);
        }
        let owner = std::mem::size_of::<OwnerReference>();
        Ok(bytes.saturating_add(slots_bytes(count, owner)))
    }
}

/// One owner reference: its texts.
#[derive(Clone, Copy)]
struct Owner;

impl<'de> DeserializeSeed<'de> for Owner {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Owner {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an owner reference")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<usize, A::Error> {
        let mut bytes = 0usize;
        while let Some(key) = fields.next_key::<std::borrow::Cow<'de, str>>()? {
            let weight = match &*key {
                "apiVersion" | "kind" | "name" | "uid" => fields.next_value_seed(Text)?,
                _ => {
                    fields.next_value::<IgnoredAny>()?;
                    0
                }
            };
            bytes = bytes.saturating_add(weight);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::held::metadata_held_bytes;

    /// `text`'s fields weighed each, added up.
    fn weighed(text: &str) -> usize {
        let fields: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
        fields
            .iter()
            .filter_map(|(field, value)| Some((field_weigher(field)?, value.to_string())))
            .map(|(weigher, value)| {
                weigher
                    .deserialize(&mut serde_json::Deserializer::from_str(&value))
                    .unwrap()
            })
            .sum()
    }

    /// Metadata of every part `metadata_held_bytes` weighs, and some it does not.
    fn metadata() -> impl Strategy<Value = Value> {
        let texts = || prop::collection::btree_map("[a-z0-9./-]{1,12}", "\\PC{0,12}", 0..40);
        let owner = (
            "[a-z/0-9]{1,12}",
            "[A-Z][a-z]{0,8}",
            "[a-z0-9-]{1,20}",
            any::<bool>(),
        )
            .prop_map(|(api_version, kind, name, controller)| {
                json!({"apiVersion": api_version, "kind": kind, "name": name,
                       "uid": format!("uid-{name}"), "controller": controller})
            });
        (
            prop::option::of(texts()),
            prop::option::of(texts()),
            prop::option::of(prop::collection::vec("[a-z./-]{1,20}", 0..30)),
            prop::option::of(prop::collection::vec(owner, 0..12)),
            prop::option::of("[a-z0-9-]{1,30}"),
            prop::option::of("[0-9]{1,12}"),
        )
            .prop_map(|(labels, annotations, finalizers, owners, name, version)| {
                json!({
                    "name": name, "namespace": "tenant", "uid": "5f0c7c4e-1d7e-4a43-9d5b-3f6a1c2b7d10",
                    "resourceVersion": version, "generation": 3,
                    "creationTimestamp": "2026-12-07T10:00:00Z",
                    "labels": labels, "annotations": annotations, "finalizers": finalizers,
                    "ownerReferences": owners,
                    "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
                })
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// Weighed from its text, metadata weighs what it holds decoded.
        #[test]
        fn metadata_text_weighs_what_its_metadata_holds_decoded(metadata in metadata()) {
            let text = metadata.to_string();
            let mut decoded: ObjectMeta = serde_json::from_value(metadata).unwrap();
            // Lean decoding leaves them out, and so does the weight.
            decoded.managed_fields = None;
            prop_assert_eq!(weighed(&text), metadata_held_bytes(&decoded));
        }
    }

    #[test]
    fn a_label_of_nine_bytes_weighs_twenty_times_its_text() {
        let labels: serde_json::Map<String, Value> = (0..100_000)
            .map(|index| (format!("{index:x}"), Value::String(String::new())))
            .collect();
        let text = json!({"name": "dense", "labels": labels}).to_string();
        let held = weighed(&text);
        assert!(held > 15 * text.len(), "{held} for {} of text", text.len());
        let decoded: ObjectMeta = serde_json::from_str(&text).unwrap();
        assert_eq!(held, metadata_held_bytes(&decoded));
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_as_objectmeta_refuses_them() {
        for text in [
            r#"{"labels":["a"]}"#,
            r#"{"finalizers":{"a":"b"}}"#,
            r#"{"name":5}"#,
            r#"{"ownerReferences":[5]}"#,
        ] {
            let fields: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
            let (field, value) = fields.iter().next().unwrap();
            let error = field_weigher(field)
                .unwrap()
                .deserialize(&mut serde_json::Deserializer::from_str(&value.to_string()));
            assert!(error.is_err(), "{text}");
            assert!(serde_json::from_str::<ObjectMeta>(text).is_err(), "{text}");
        }
    }
}
