//! Values bound to an expression's variables, converted to CEL once: one object judged by
//! several expressions (a policy's `match` and `finished`), or one set of objects judged at many
//! times (a Cleaner's search for the moment its conditions turn true).
//!
//! Binding a variable converts it twice over: from JSON to CEL's values, and then — inside the
//! interpreter, every time a variable is added to a context — into the tree the interpreter
//! reads (about 20 ms for an object at etcd's 1.5 MiB limit, and not a step the cost meter
//! sees). So the values are bound once, into a context of their own that holds every function
//! the evaluator offers ([`Bound`]), and each evaluation runs in a scope inside it: however many
//! expressions judge an object, and however many times a Cleaner's search judges its targets,
//! the conversion is paid once, by whoever converts (the controller's evaluator, a step of its
//! own, charged to the tenant's namespace).

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use kube_cel::cel::{Context, Value as CelValue};
use serde_json::Value;

use super::conversion::{from_json, to_cel};
use super::{VARIABLE, contained, root, stack};

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

/// A context of its own with variables bound in it, the evaluator's functions registered.
pub(super) struct Bound(pub(super) Context<'static>);

impl Bound {
    /// A context with `values` bound by name; the error names the one that cannot be.
    fn new(values: Vec<(String, CelValue)>) -> Result<Self, (String, String)> {
        let mut context = root();
        for (name, value) in values {
            let bound =
                stack::deep(|| contained(|| context.add_variable_from_value(name.clone(), value)));
            bound.map_err(|panic| (name, panic))?;
        }
        Ok(Self(context))
    }
}

/// An object converted to CEL once, and bound as `object`, for every expression that judges it.
#[derive(Clone)]
pub struct Converted(Variables);

impl fmt::Debug for Converted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Converted(..)")
    }
}

impl Converted {
    /// `object` as CEL sees it.
    pub fn new(object: &Value) -> Result<Self, ConversionError> {
        let value = stack::deep(|| to_cel(object))
            .map_err(|error| ConversionError::Object(error.to_string()))?;
        Self::of_value(value)
    }

    /// The object from its JSON text, read straight into CEL's values (no JSON tree between).
    pub fn from_json(text: &[u8]) -> Result<Self, ConversionError> {
        let value = stack::deep(|| from_json(text)).map_err(ConversionError::Object)?;
        Self::of_value(value)
    }

    fn of_value(value: CelValue) -> Result<Self, ConversionError> {
        let bound = Bound::new(vec![(VARIABLE.to_owned(), value)])
            .map_err(|(_, reason)| ConversionError::Object(reason))?;
        Ok(Converted(Variables {
            bound: Arc::new(bound),
            names: vec![VARIABLE.to_owned()],
        }))
    }

    /// The object as the one variable `object`.
    pub fn variables(&self) -> &Variables {
        &self.0
    }
}

/// Named JSON values converted to CEL and bound once, so that one set of objects can be judged
/// at many times (a search for the moment conditions turn true) without converting them again.
#[derive(Clone)]
pub struct Variables {
    pub(super) bound: Arc<Bound>,
    names: Vec<String>,
}

impl Default for Variables {
    fn default() -> Self {
        Self {
            bound: Arc::new(Bound(root())),
            names: Vec::new(),
        }
    }
}

impl fmt::Debug for Variables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Variables({:?})", self.names)
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
                    stack::deep(|| to_cel(value)).map_err(|error| ConversionError::Variable {
                        name: name.to_owned(),
                        reason: error.to_string(),
                    })?;
                Ok((name.to_owned(), converted))
            })
            .collect::<Result<Vec<_>, ConversionError>>()?;
        let names = values.iter().map(|(name, _)| name.clone()).collect();
        let bound = Bound::new(values)
            .map_err(|(name, reason)| ConversionError::Variable { name, reason })?;
        Ok(Self {
            bound: Arc::new(bound),
            names,
        })
    }

    /// Named values from their JSON texts, each read straight into CEL's values.
    pub fn from_json<'a>(
        texts: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, ConversionError> {
        let values = texts
            .into_iter()
            .map(|(name, text)| {
                let value = stack::deep(|| from_json(text)).map_err(|reason| {
                    ConversionError::Variable {
                        name: name.to_owned(),
                        reason,
                    }
                })?;
                Ok((name.to_owned(), value))
            })
            .collect::<Result<Vec<_>, ConversionError>>()?;
        let names = values.iter().map(|(name, _)| name.clone()).collect();
        let bound = Bound::new(values)
            .map_err(|(name, reason)| ConversionError::Variable { name, reason })?;
        Ok(Self {
            bound: Arc::new(bound),
            names,
        })
    }
}

pub(super) fn timestamp_value(at: Timestamp) -> Result<CelValue, ConversionError> {
    let utc =
        chrono::DateTime::from_timestamp(at.as_second(), at.subsec_nanosecond().unsigned_abs())
            .ok_or(ConversionError::Time(at))?;
    Ok(CelValue::Timestamp(utc.fixed_offset()))
}
