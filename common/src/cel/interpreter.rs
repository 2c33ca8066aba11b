//! Where an expression runs. The model's rules — a policy's parts in order
//! ([`crate::governing::Answers`]), a Cleaner's search over time ([`crate::cleaner::Judge`]) —
//! say *which* expression to evaluate next; an [`Interpreter`] evaluates it on values bound
//! once. [`InProcess`] runs it here, metered by [`super::meter`]: what the plugin, the webhook
//! and the model's own tests use. The controller evaluates tenants' expressions in a child
//! process whose memory, CPU time and stack the operating system bounds (the evaluator crate's
//! sandbox), through the same rules, so the two cannot decide differently.

use jiff::Timestamp;

use super::{EvalError, Expression, Variables};

/// What an expression gave, of the type it must produce ([`super::Expect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Condition(bool),
    Time(Timestamp),
}

/// Evaluates expressions on values bound once (an object, a Cleaner's targets).
pub trait Interpreter {
    /// Values bound for evaluation.
    type Bound;

    /// Evaluates `expression` on `on`, with `time` (a timestamp by name) bound as well where
    /// given.
    fn answer(
        &mut self,
        expression: &Expression,
        on: &Self::Bound,
        time: Option<(&str, Timestamp)>,
    ) -> Result<Answer, EvalError>;

    /// Evaluates a condition.
    fn condition(
        &mut self,
        expression: &Expression,
        on: &Self::Bound,
        time: Option<(&str, Timestamp)>,
    ) -> Result<bool, EvalError> {
        match self.answer(expression, on, time)? {
            Answer::Condition(holds) => Ok(holds),
            Answer::Time(at) => Err(expression.error(format!("gave {at}, not true or false"))),
        }
    }

    /// Evaluates a time.
    fn time(&mut self, expression: &Expression, on: &Self::Bound) -> Result<Timestamp, EvalError> {
        match self.answer(expression, on, None)? {
            Answer::Time(at) => Ok(at),
            Answer::Condition(holds) => {
                Err(expression.error(format!("gave {holds}, not a timestamp")))
            }
        }
    }
}

/// Expressions evaluated in this process, on this thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcess;

impl Interpreter for InProcess {
    type Bound = Variables;

    fn answer(
        &mut self,
        expression: &Expression,
        on: &Variables,
        time: Option<(&str, Timestamp)>,
    ) -> Result<Answer, EvalError> {
        expression.answer(on, time)
    }
}
