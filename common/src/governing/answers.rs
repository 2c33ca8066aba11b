//! A policy's expressions evaluated on one object, once: by the controller ahead of judging, off
//! its loop, or by [`super::judge`] itself where nothing evaluated them ahead.

use jiff::Timestamp;
use serde_json::Value;

use crate::cel::{Converted, EvalError, Expression, InProcess, Interpreter};
use crate::policies::Rules;

/// What a policy's expressions say of one object. `None` where the policy has no such
/// expression, or (for `finished`) where its `match` did not hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers {
    pub matches: Option<Result<bool, EvalError>>,
    pub succeeded: Option<Result<bool, EvalError>>,
    pub failed: Option<Result<bool, EvalError>>,
    pub at: Option<Result<Timestamp, EvalError>>,
    /// What `holdWhile` said.
    pub hold: Option<Result<bool, EvalError>>,
}

/// One of a policy's expressions: the unit the controller's evaluator runs at a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Match,
    Succeeded,
    Failed,
    At,
    Hold,
}

impl Part {
    /// The order they are evaluated in: `match` decides whether the others are.
    const ORDER: [Part; 5] = [
        Part::Match,
        Part::Succeeded,
        Part::Failed,
        Part::At,
        Part::Hold,
    ];

    fn expression(self, rules: &Rules) -> Option<&Expression> {
        match self {
            Part::Match => rules.matches.as_ref(),
            Part::Succeeded => rules.finished.succeeded.as_ref(),
            Part::Failed => rules.finished.failed.as_ref(),
            Part::At => rules.finished.at.as_ref(),
            Part::Hold => rules.hold_while.as_ref(),
        }
    }
}

impl Answers {
    /// Evaluates `rules`' expressions on `object`, converting it to CEL once.
    pub fn compute(rules: &Rules, object: &Value) -> Self {
        if !rules.has_expressions() {
            return Self::default();
        }
        match Converted::new(object) {
            Ok(converted) => Self::compute_converted(rules, &converted),
            // Not representable in CEL: every expression fails on it, saying why.
            Err(_) => {
                let condition = |expression: &Option<Expression>| {
                    expression
                        .as_ref()
                        .map(|expression| expression.condition(object))
                };
                Self {
                    matches: condition(&rules.matches),
                    succeeded: condition(&rules.finished.succeeded),
                    failed: condition(&rules.finished.failed),
                    at: rules.finished.at.as_ref().map(|at| at.time(object)),
                    hold: condition(&rules.hold_while),
                }
            }
        }
    }

    /// `rules`' expressions, every one answered as not evaluated: what the controller's judge
    /// takes for answers its evaluator has not given yet (none match, none finished, all hold).
    pub fn not_evaluated(rules: &Rules, _: &Value) -> Self {
        fn unanswered<T>(expression: &Option<Expression>) -> Option<Result<T, EvalError>> {
            let reason = || "not evaluated yet".to_owned();
            let error =
                |expression: &Expression| EvalError::new(expression.source(), reason(), None);
            expression.as_ref().map(|expression| Err(error(expression)))
        }
        Self {
            matches: unanswered(&rules.matches),
            succeeded: unanswered(&rules.finished.succeeded),
            failed: unanswered(&rules.finished.failed),
            at: unanswered(&rules.finished.at),
            hold: unanswered(&rules.hold_while),
        }
    }

    /// Evaluates `rules`' expressions on an object converted already, one [`Part`] after
    /// another: the computation the controller's evaluator runs a part per turn.
    pub fn compute_converted(rules: &Rules, object: &Converted) -> Self {
        let mut answers = Self::default();
        while let Some(part) = answers.next_part(rules) {
            answers.answer(rules, part, object);
        }
        answers
    }

    /// The next of `rules`' expressions to evaluate, given what is answered so far: `match`
    /// first, and nothing after a `match` that did not answer true.
    pub fn next_part(&self, rules: &Rules) -> Option<Part> {
        if self
            .matches
            .as_ref()
            .is_some_and(|matched| matched != &Ok(true))
        {
            return None;
        }
        Part::ORDER
            .into_iter()
            .find(|part| part.expression(rules).is_some() && !self.answered(*part))
    }

    /// Evaluates `part` of `rules` on `object` here, and keeps its answer.
    pub fn answer(&mut self, rules: &Rules, part: Part, object: &Converted) {
        self.answer_in(&mut InProcess, rules, part, object.variables());
    }

    /// Evaluates `part` of `rules` on `object` with `interpreter`, and keeps its answer: the
    /// one step the controller's evaluator runs at a turn, wherever the expression runs.
    pub fn answer_in<I: Interpreter>(
        &mut self,
        interpreter: &mut I,
        rules: &Rules,
        part: Part,
        object: &I::Bound,
    ) {
        let Some(expression) = part.expression(rules) else {
            return;
        };
        let mut condition = || interpreter.condition(expression, object, None);
        match part {
            Part::Match => self.matches = Some(condition()),
            Part::Succeeded => self.succeeded = Some(condition()),
            Part::Failed => self.failed = Some(condition()),
            Part::Hold => self.hold = Some(condition()),
            Part::At => self.at = Some(interpreter.time(expression, object)),
        }
    }

    fn answered(&self, part: Part) -> bool {
        match part {
            Part::Match => self.matches.is_some(),
            Part::Succeeded => self.succeeded.is_some(),
            Part::Failed => self.failed.is_some(),
            Part::At => self.at.is_some(),
            Part::Hold => self.hold.is_some(),
        }
    }

    /// Whether `holdWhile` holds the object: unless it answered false (an expression that could
    /// not be evaluated holds, the safe side for a gate before deletion).
    pub fn holds(&self) -> bool {
        self.hold.as_ref().is_some_and(|hold| hold != &Ok(false))
    }

    /// The expressions that went past their cost or time limit: field path and error.
    pub fn exceeded(&self) -> Vec<(&'static str, &EvalError)> {
        let conditions = [
            ("spec.match", &self.matches),
            ("spec.finished.succeeded", &self.succeeded),
            ("spec.finished.failed", &self.failed),
            ("spec.holdWhile", &self.hold),
        ];
        let mut exceeded: Vec<(&'static str, &EvalError)> = conditions
            .into_iter()
            .filter_map(|(path, answer)| match answer {
                Some(Err(error)) if error.exceeded().is_some() => Some((path, error)),
                _ => None,
            })
            .collect();
        if let Some(Err(error)) = &self.at
            && error.exceeded().is_some()
        {
            exceeded.push(("spec.finished.at", error));
        }
        exceeded
    }
}
