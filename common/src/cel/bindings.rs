//! Values bound to an expression's variables, converted to CEL once: one object judged by
//! several expressions (a policy's `match` and `finished`), or one set of objects judged at many
//! times (a Cleaner's search for the moment its conditions turn true).

use std::fmt;

use jiff::Timestamp;
use kube_cel::cel::Value as CelValue;
use serde_json::Value;

/// A value CEL cannot represent, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error("the object is not representable in CEL: {0}")]
    Object(String),
    #[error("`{name}` is not representable in CEL: {reason}")]
    Variable { name: String, reason: String },
    #[error("{0} is out of CEL's range")]
    Time(Timestamp),
}

/// An object converted to CEL once, for every expression that judges it.
#[derive(Clone)]
pub struct Converted(pub(super) CelValue);

impl fmt::Debug for Converted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Converted(..)")
    }
}

impl Converted {
    /// `object` as CEL sees it.
    pub fn new(object: &Value) -> Result<Self, ConversionError> {
        super::stack::deep(|| kube_cel::cel::to_value(object))
            .map(Converted)
            .map_err(|error| ConversionError::Object(error.to_string()))
    }
}

/// Named JSON values converted to CEL once, so that one set of objects can be judged at many
/// times (a search for the moment conditions turn true) without converting them again.
#[derive(Clone, Default)]
pub struct Variables {
    pub(super) values: Vec<(String, CelValue)>,
}

impl fmt::Debug for Variables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.values.iter().map(|(name, _)| name.as_str()).collect();
        write!(f, "Variables({names:?})")
    }
}

impl Variables {
    /// `values` by name.
    pub fn new<'a>(
        values: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> Result<Self, ConversionError> {
        let values = values
            .into_iter()
            .map(|(name, value)| {
                let converted =
                    super::stack::deep(|| kube_cel::cel::to_value(value)).map_err(|error| {
                        ConversionError::Variable {
                            name: name.to_owned(),
                            reason: error.to_string(),
                        }
                    })?;
                Ok((name.to_owned(), converted))
            })
            .collect::<Result<_, ConversionError>>()?;
        Ok(Self { values })
    }
}

pub(super) fn timestamp_value(at: Timestamp) -> Result<CelValue, ConversionError> {
    let utc =
        chrono::DateTime::from_timestamp(at.as_second(), at.subsec_nanosecond().unsigned_abs())
            .ok_or(ConversionError::Time(at))?;
    Ok(CelValue::Timestamp(utc.fixed_offset()))
}
