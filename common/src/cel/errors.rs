//! Why an expression does not compile, or could not be evaluated on an object: displayed as
//! the rule of a [`crate::FieldError`], or in a policy's or Cleaner's status.

use super::cost::ASSUMED_ITEMS;
use super::meter::{Exceeded, thousands};
use super::{Expect, VARIABLE};

/// Why an expression does not compile; displayed as the rule of a [`crate::FieldError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("is empty: {}", example(*.0))]
    Empty(Expect),
    #[error("is not valid CEL: {0}")]
    Syntax(String),
    #[error("uses {}: the only variable is `{VARIABLE}`, the object judged", quoted(.0))]
    Variables(Vec<String>),
    #[error("uses {}, which is not a variable here: the variables are {}", quoted(.used), quoted(.declared))]
    Undeclared {
        used: Vec<String>,
        declared: Vec<String>,
    },
    #[error("calls {}, which CEL does not have", quoted(.0))]
    Functions(Vec<String>),
    #[error("{problem}: {}", example(*.expect))]
    WrongResult {
        problem: &'static str,
        expect: Expect,
    },
    #[error(
        "has an estimated cost of {}, above the limit of {}: a loop runs its body once per \
         item, so loops inside loops multiply and `map` or `filter` copies its list at each item \
         (a list read from the object is assumed to hold \
         up to {} items)",
        thousands(*.estimate),
        thousands(*.limit),
        thousands(ASSUMED_ITEMS)
    )]
    TooCostly { estimate: u64, limit: u64 },
    #[error(
        "is {} bytes long, above the limit of {}: split it between `match` and `finished`, or \
         test fewer things",
        thousands(*.bytes as u64),
        thousands(*.limit as u64)
    )]
    TooLong { bytes: usize, limit: usize },
    #[error(
        "has {} tokens (names, literals, operators), above the limit of {}",
        thousands(*.tokens as u64),
        thousands(*.limit as u64)
    )]
    TooManyTokens { tokens: usize, limit: usize },
    #[error(
        "nests {depth} deep, above the limit of {limit}: each bracket counts 3 and each operator \
         of a chain such as `a + b + c` one (`&&` and `||` chains count their logarithm); \
         write the chain as a list and test it once, e.g. `x in [\"a\", \"b\"]`"
    )]
    TooDeep { depth: u32, limit: u32 },
    #[error(
        "calls {}, which kube-retention does not offer: its cost cannot be bounded before it \
         runs",
        quoted(.0)
    )]
    NotOffered(Vec<String>),
    #[error(
        "gives `{function}` a pattern that is not a string literal: a pattern is compiled once, \
         when the expression is admitted, so write it out, e.g. {function}(\"^ci-\")"
    )]
    PatternNotLiteral { function: String },
    #[error("gives `{function}` the pattern {pattern:?}, which does not compile: {reason}")]
    Pattern {
        function: String,
        pattern: String,
        reason: String,
    },
}

/// Why an expression could not be evaluated on an object (a field it reads is absent, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_text}: {reason}")]
pub struct EvalError {
    pub(super) source_text: String,
    pub(super) reason: String,
    pub(super) exceeded: Option<Exceeded>,
}

impl EvalError {
    /// An evaluation of the expression `source_text` that failed for `reason`, or because it
    /// went past `exceeded`: as an interpreter elsewhere (the controller's sandbox) reports it.
    pub fn new(source_text: &str, reason: String, exceeded: Option<Exceeded>) -> Self {
        Self {
            source_text: source_text.to_owned(),
            reason,
            exceeded,
        }
    }

    /// An evaluation that went past one of its process's bounds.
    pub fn overrun(source_text: &str, overrun: super::Overrun) -> Self {
        let exceeded = Exceeded::Process(overrun);
        Self::new(source_text, exceeded.to_string(), Some(exceeded))
    }

    /// The limit the evaluation went past, when that is why it failed.
    pub fn exceeded(&self) -> Option<Exceeded> {
        self.exceeded
    }

    /// Why it failed, without the expression.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

pub(super) fn example(expect: Expect) -> &'static str {
    match expect {
        Expect::Condition => "write a condition on `object`, e.g. object.status.phase == \"Done\"",
        Expect::Time => "write a time from `object`, e.g. timestamp(object.status.finishedAt)",
    }
}

fn quoted(names: &[String]) -> String {
    let names: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    names.join(", ")
}
