//! A policy's expressions evaluated on one object, once: by the controller ahead of judging, off
//! its loop, or by [`super::judge`] itself where nothing evaluated them ahead.

use jiff::Timestamp;
use serde_json::Value;

use crate::cel::{Converted, EvalError, Expression};
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

    /// Evaluates `rules`' expressions on an object converted already.
    pub fn compute_converted(rules: &Rules, object: &Converted) -> Self {
        let matches = rules
            .matches
            .as_ref()
            .map(|matcher| matcher.condition_of(object));
        if matches.as_ref().is_some_and(|matched| matched != &Ok(true)) {
            return Self {
                matches,
                ..Self::default()
            };
        }
        let condition = |expression: &Option<Expression>| {
            expression
                .as_ref()
                .map(|expression| expression.condition_of(object))
        };
        let finished = &rules.finished;
        Self {
            matches,
            succeeded: condition(&finished.succeeded),
            failed: condition(&finished.failed),
            at: finished.at.as_ref().map(|at| at.time_of(object)),
            hold: condition(&rules.hold_while),
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
