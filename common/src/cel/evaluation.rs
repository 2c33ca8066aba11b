//! Evaluating a compiled [`Expression`]: on an object or a set of variables converted and bound
//! once ([`super::bindings`]), metered for cost and time ([`super::meter`]), on a stack that
//! covers the deepest admitted expression ([`super::stack`]), with a panic inside the
//! interpreter answered as an error of that evaluation. The result is typed by what the
//! expression must produce ([`Expect`]): an [`Answer`].

use jiff::Timestamp;
use kube_cel::cel::Value as CelValue;
use serde_json::Value;

use super::bindings::{Bound, timestamp_value};
use super::interpreter::{Answer, InProcess, Interpreter};
use super::{Budget, Converted, EvalError, Expect, Expression, Variables, contained, meter, stack};

impl Expression {
    /// Evaluates it on `on` (with `time` bound by name where given) within the default
    /// [`Budget`]: the one evaluation every interpreter runs, here or in the controller's
    /// sandbox.
    pub fn answer(
        &self,
        on: &Variables,
        time: Option<(&str, Timestamp)>,
    ) -> Result<Answer, EvalError> {
        self.answer_within(Budget::default(), on, time).0
    }

    /// Like [`Expression::answer`] within `budget`, and what it cost.
    pub fn answer_within(
        &self,
        budget: Budget,
        on: &Variables,
        time: Option<(&str, Timestamp)>,
    ) -> (Result<Answer, EvalError>, u64) {
        let time = time
            .map(|(name, at)| timestamp_value(at).map(|value| (name, value)))
            .transpose();
        let time = match time {
            Ok(time) => time,
            Err(reason) => return (Err(self.error(reason.to_string())), 0),
        };
        let (result, spent) = self.run(budget, &on.bound, time);
        (result.and_then(|value| self.typed(value)), spent)
    }

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
        let (result, spent) = self.answer_within(budget, object.variables(), None);
        (result.and_then(|answer| self.condition_from(answer)), spent)
    }

    /// Evaluates a condition on `object`, here.
    pub fn condition(&self, object: &Value) -> Result<bool, EvalError> {
        self.condition_of(&self.convert(object)?)
    }

    /// Evaluates a time on `object`, here.
    pub fn time(&self, object: &Value) -> Result<Timestamp, EvalError> {
        self.time_of(&self.convert(object)?)
    }

    /// Evaluates a condition on an object converted already, here.
    pub fn condition_of(&self, object: &Converted) -> Result<bool, EvalError> {
        InProcess.condition(self, object.variables(), None)
    }

    /// Evaluates a time on an object converted already, here.
    pub fn time_of(&self, object: &Converted) -> Result<Timestamp, EvalError> {
        InProcess.time(self, object.variables())
    }

    /// Evaluates a condition over `variables`, and a time bound by name where given, here.
    pub fn condition_in(
        &self,
        variables: &Variables,
        time: Option<(&str, Timestamp)>,
    ) -> Result<bool, EvalError> {
        InProcess.condition(self, variables, time)
    }

    fn condition_from(&self, answer: Answer) -> Result<bool, EvalError> {
        match answer {
            Answer::Condition(holds) => Ok(holds),
            Answer::Time(at) => Err(self.error(format!("gave {at}, not true or false"))),
        }
    }

    fn convert(&self, object: &Value) -> Result<Converted, EvalError> {
        Converted::new(object).map_err(|reason| self.error(reason.to_string()))
    }

    /// `value` as what the expression must produce.
    fn typed(&self, value: CelValue) -> Result<Answer, EvalError> {
        match (self.expect, value) {
            (Expect::Condition, CelValue::Bool(holds)) => Ok(Answer::Condition(holds)),
            (Expect::Condition, other) => {
                Err(self.error(format!("gave {other:?}, not true or false")))
            }
            (Expect::Time, CelValue::Timestamp(at)) => Timestamp::from_second(at.timestamp())
                .and_then(|second| {
                    second.checked_add(jiff::SignedDuration::from_nanos(i64::from(
                        at.timestamp_subsec_nanos(),
                    )))
                })
                .map(Answer::Time)
                .map_err(|error| self.error(error.to_string())),
            (Expect::Time, CelValue::String(text)) => text
                .parse()
                .map(Answer::Time)
                .map_err(|_| self.error(format!("gave {text:?}, not an RFC 3339 time"))),
            (Expect::Time, other) => Err(self.error(format!("gave {other:?}, not a timestamp"))),
        }
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

    /// An error of this expression, saying `reason`.
    pub(crate) fn error(&self, reason: String) -> EvalError {
        EvalError {
            source_text: self.source.clone(),
            reason,
            exceeded: None,
        }
    }
}
