//! JSON to CEL values as Kubernetes converts them: a whole number is an `int` (a `uint` only
//! past `int`'s range), a fraction a `double`.
//!
//! kube-cel's serializer takes serde_json's own view, in which every whole number not below
//! zero is unsigned: `object.status.succeeded` would be a `uint`, and since CEL compares a
//! `uint` with an `int` literal as unequal (`object.status.failed != 0` true for a Job that
//! never failed) and refuses to add them, an expression written as for the API server would
//! judge wrongly. So the JSON is handed over through [`AsKubernetes`], which serializes numbers
//! as Kubernetes reads them and everything else as it is.

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
