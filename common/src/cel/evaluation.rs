//! Evaluating a compiled [`Expression`]: on an object or a set of variables converted and bound
//! once ([`super::bindings`]), metered for cost and time ([`super::meter`]), on a stack that
//! covers the deepest admitted expression ([`super::stack`]), with a panic inside the
//! interpreter answered as an error of that evaluation.

use jiff::Timestamp;
use kube_cel::cel::Value as CelValue;
use serde_json::Value;

use super::bindings::{Bound, timestamp_value};
use super::{Budget, Converted, EvalError, Expression, Variables, contained, meter, stack};

impl Expression {
    /// Evaluates a condition on `object` within `budget`, and answers what it cost; for the
    /// cost model's tests and benchmarks.
    pub fn condition_costing(
        &self,
        object: &Value,
        budget: Budget,
    ) -> (Result<bool, EvalError>, u64) {
        match self.convert(object) {
            Ok(converted) => self.condition_costing_converted(&converted, budget),
            Err(error) => (Err(error), 0),
        }
    }

    /// Like [`Expression::condition_costing`], on an object converted already.
    pub fn condition_costing_converted(
        &self,
        object: &Converted,
        budget: Budget,
    ) -> (Result<bool, EvalError>, u64) {
        let (result, spent) = self.run(budget, &object.0, None);
        let result = result.and_then(|value| match value {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        });
        (result, spent)
    }

    /// Evaluates a condition on `object`.
    pub fn condition(&self, object: &Value) -> Result<bool, EvalError> {
        self.condition_of(&self.convert(object)?)
    }

    /// Evaluates a time on `object`.
    pub fn time(&self, object: &Value) -> Result<Timestamp, EvalError> {
        self.time_of(&self.convert(object)?)
    }

    /// Evaluates a condition on an object converted already.
    pub fn condition_of(&self, object: &Converted) -> Result<bool, EvalError> {
        match self.evaluate(object)? {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        }
    }

    /// Evaluates a time on an object converted already.
    pub fn time_of(&self, object: &Converted) -> Result<Timestamp, EvalError> {
        match self.evaluate(object)? {
            CelValue::Timestamp(at) => Timestamp::from_second(at.timestamp())
                .and_then(|second| {
                    second.checked_add(jiff::SignedDuration::from_nanos(i64::from(
                        at.timestamp_subsec_nanos(),
                    )))
                })
                .map_err(|error| self.error(error.to_string())),
            CelValue::String(text) => text
                .parse()
                .map_err(|_| self.error(format!("gave {text:?}, not an RFC 3339 time"))),
            other => Err(self.error(format!("gave {other:?}, not a timestamp"))),
        }
    }

    /// Evaluates a condition over `variables`, and a time bound by name where given.
    pub fn condition_in(
        &self,
        variables: &Variables,
        time: Option<(&str, Timestamp)>,
    ) -> Result<bool, EvalError> {
        let time = time
            .map(|(name, at)| timestamp_value(at).map(|value| (name, value)))
            .transpose();
        let time = time.map_err(|reason| self.error(reason.to_string()))?;
        let (result, _) = self.run(Budget::default(), &variables.bound, time);
        match result? {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        }
    }

    fn convert(&self, object: &Value) -> Result<Converted, EvalError> {
        Converted::new(object).map_err(|reason| self.error(reason.to_string()))
    }

    fn evaluate(&self, object: &Converted) -> Result<CelValue, EvalError> {
        let (result, _) = self.run(Budget::default(), &object.0, None);
        result
    }

    /// Runs the metered program in a scope of `bound` (with `time`, a timestamp by name, where
    /// given: a small value, bound at each evaluation), within `budget`.
    fn run(
        &self,
        budget: Budget,
        bound: &Bound,
        time: Option<(&str, CelValue)>,
    ) -> (Result<CelValue, EvalError>, u64) {
        let (result, spent, exceeded) = stack::deep(|| {
            meter::metered(budget, &self.sites, || {
                contained(|| {
                    let mut context = bound.0.new_inner_scope();
                    if let Some((name, at)) = time {
                        context.add_variable_from_value(name, at);
                    }
                    CelValue::resolve(&self.metered, &context)
                })
            })
        });
        let result = result.unwrap_or_else(|panic| {
            Err(kube_cel::cel::ExecutionError::function_error(
                "evaluation",
                format!("failed inside the interpreter: {panic}"),
            ))
        });
        let result = match exceeded {
            Some(exceeded) => Err(EvalError {
                source_text: self.source.clone(),
                reason: exceeded.to_string(),
                exceeded: Some(exceeded),
            }),
            None => result.map_err(|error| self.error(error.to_string())),
        };
        (result, spent)
    }

    fn error(&self, reason: String) -> EvalError {
        EvalError {
            source_text: self.source.clone(),
            reason,
            exceeded: None,
        }
    }
}
