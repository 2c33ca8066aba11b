//! JSON to CEL values as Kubernetes converts them: a whole number is an `int` (a `uint` only
//! past `int`'s range), a fraction a `double`.
//!
//! kube-cel's serializer takes serde_json's own view, in which every whole number not below
//! zero is unsigned: `object.status.succeeded` would be a `uint`, and since CEL compares a
//! `uint` with an `int` literal as unequal (`object.status.failed != 0` true for a Job that
//! never failed) and refuses to add them, an expression written as for the API server would
//! judge wrongly. So the JSON is handed over through [`AsKubernetes`], which serializes numbers
//! as Kubernetes reads them and everything else as it is.

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{SerializationError, Value as CelValue};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// `value` as CEL values, its numbers as Kubernetes reads them: what every JSON given to an
/// expression goes through.
pub(super) fn to_cel(value: &Value) -> Result<CelValue, SerializationError> {
    kube_cel::cel::to_value(AsKubernetes(value))
}

/// A JSON value serialized with its numbers as Kubernetes' CEL reads them.
struct AsKubernetes<'a>(&'a Value);

impl Serialize for AsKubernetes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Number(number) => match (number.as_i64(), number.as_u64(), number.as_f64()) {
                (Some(int), _, _) => serializer.serialize_i64(int),
                (None, Some(uint), _) => serializer.serialize_u64(uint),
                (None, None, Some(double)) => serializer.serialize_f64(double),
                (None, None, None) => number.serialize(serializer),
            },
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&AsKubernetes(item))?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, item) in fields {
                    map.serialize_entry(key, &AsKubernetes(item))?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// JSON text read straight into CEL values, its numbers as Kubernetes reads them (as
/// [`to_cel`] converts a JSON tree): what the controller's sandbox binds, without the tree
/// between. The error says where the text is malformed.
pub(super) fn from_json(text: &[u8]) -> Result<CelValue, String> {
    let mut reader = serde_json::Deserializer::from_slice(text);
    let value = serde::de::DeserializeSeed::deserialize(Kubernetes, &mut reader)
        .map_err(|error| error.to_string())?;
    reader.end().map_err(|error| error.to_string())?;
    Ok(value)
}

/// Builds a CEL value from whatever serde reads.
#[derive(Clone, Copy)]
struct Kubernetes;

impl<'de> serde::de::DeserializeSeed<'de> for Kubernetes {
    type Value = CelValue;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<CelValue, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Kubernetes {
    type Value = CelValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<CelValue, E> {
        Ok(CelValue::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<CelValue, E> {
        Ok(CelValue::Int(value))
    }

    /// A whole number is an `int` where it fits, a `uint` only past `int`'s range.
    fn visit_u64<E>(self, value: u64) -> Result<CelValue, E> {
        Ok(i64::try_from(value).map_or(CelValue::UInt(value), CelValue::Int))
    }

    fn visit_f64<E>(self, value: f64) -> Result<CelValue, E> {
        Ok(CelValue::Float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<CelValue, E> {
        Ok(CelValue::String(std::sync::Arc::new(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<CelValue, E> {
        Ok(CelValue::String(std::sync::Arc::new(value)))
    }

    fn visit_unit<E>(self) -> Result<CelValue, E> {
        Ok(CelValue::Null)
    }

    fn visit_none<E>(self) -> Result<CelValue, E> {
        Ok(CelValue::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<CelValue, A::Error> {
        let mut list = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(self)? {
            list.push(item);
        }
        Ok(CelValue::List(std::sync::Arc::new(list)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut fields: A) -> Result<CelValue, A::Error> {
        let mut map = std::collections::HashMap::with_capacity(fields.size_hint().unwrap_or(0));
        while let Some(key) = fields.next_key::<String>()? {
            let value = fields.next_value_seed(self)?;
            map.insert(Key::String(std::sync::Arc::new(key)), value);
        }
        Ok(CelValue::Map(Map {
            map: std::sync::Arc::new(map),
        }))
    }
}
