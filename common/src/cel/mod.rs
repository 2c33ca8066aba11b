//! CEL expressions over `object`, as policies write them (`match`, `finished.*`): compiled once
//! with everything that can be known without an object checked — syntax, variables other than
//! `object`, functions the evaluator lacks, a result of the wrong type written outright — and
//! evaluated with Kubernetes' CEL library (kube-cel) on top of the standard one.

use std::fmt;

use jiff::Timestamp;
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::Value;

/// The only variable an expression may use.
pub const VARIABLE: &str = "object";

/// What an expression must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// True or false (`match`, `finished.succeeded`, `finished.failed`).
    Condition,
    /// A timestamp (`finished.at`).
    Time,
}

pub struct Expression {
    source: String,
    program: Program,
    expect: Expect,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expression({:?})", self.source)
    }
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.expect == other.expect
    }
}

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
}

/// Why an expression could not be evaluated on an object (a field it reads is absent, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_text}: {reason}")]
pub struct EvalError {
    source_text: String,
    reason: String,
}

mod checks;
mod variables;

use checks::{has_function, is_operator, wrong_result};

thread_local! {
    static ROOT: Context<'static> = Context::default().with_all();
}

impl Expression {
    /// Compiles `source` over `object`, or says what is wrong with it.
    pub fn compile(source: &str, expect: Expect) -> Result<Self, CompileError> {
        Self::compile_over(source, expect, &[VARIABLE])
    }

    /// Compiles `source` over the variables `declared`, or says what is wrong with it.
    pub fn compile_over(
        source: &str,
        expect: Expect,
        declared: &[&str],
    ) -> Result<Self, CompileError> {
        if source.trim().is_empty() {
            return Err(CompileError::Empty(expect));
        }
        let program = Program::compile(source)
            .map_err(|errors| CompileError::Syntax(one_line(&errors.to_string())))?;
        let unknown: Vec<String> = variables::free(&program.expression().expr)
            .into_iter()
            .filter(|name| !declared.contains(&name.as_str()))
            .collect();
        let references = program.references();
        if !unknown.is_empty() && declared == [VARIABLE] {
            return Err(CompileError::Variables(unknown));
        }
        if !unknown.is_empty() {
            let declared = declared.iter().map(|name| (*name).to_owned()).collect();
            return Err(CompileError::Undeclared {
                used: unknown,
                declared,
            });
        }
        let missing: Vec<String> = references
            .functions()
            .into_iter()
            .filter(|name| !is_operator(name) && !has_function(name))
            .map(str::to_owned)
            .collect();
        if !missing.is_empty() {
            return Err(CompileError::Functions(missing));
        }
        if let Some(problem) = wrong_result(&program.expression().expr, expect) {
            return Err(CompileError::WrongResult { problem, expect });
        }
        Ok(Self {
            source: source.to_owned(),
            program,
            expect,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates a condition on `object`.
    pub fn condition(&self, object: &Value) -> Result<bool, EvalError> {
        match self.evaluate(object)? {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        }
    }

    /// Evaluates a time on `object`.
    pub fn time(&self, object: &Value) -> Result<Timestamp, EvalError> {
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
        let time = time.map_err(|reason| self.error(reason))?;
        let result = ROOT.with(|root| {
            let mut context = root.new_inner_scope();
            for (name, value) in &variables.values {
                context.add_variable_from_value(name.clone(), value.clone());
            }
            if let Some((name, at)) = time {
                context.add_variable_from_value(name, at);
            }
            self.program.execute(&context)
        });
        match result.map_err(|error| self.error(error.to_string()))? {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        }
    }

    fn evaluate(&self, object: &Value) -> Result<CelValue, EvalError> {
        let value =
            kube_cel::cel::to_value(object).map_err(|error| self.error(error.to_string()))?;
        ROOT.with(|root| {
            let mut context = root.new_inner_scope();
            context.add_variable_from_value(VARIABLE, value);
            self.program
                .execute(&context)
                .map_err(|error| self.error(error.to_string()))
        })
    }

    fn error(&self, reason: String) -> EvalError {
        EvalError {
            source_text: self.source.clone(),
            reason,
        }
    }
}

/// Named JSON values converted to CEL once, so that one set of objects can be judged at many
/// times (a search for the moment conditions turn true) without converting them again.
#[derive(Clone, Default)]
pub struct Variables {
    values: Vec<(String, CelValue)>,
}

impl fmt::Debug for Variables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.values.iter().map(|(name, _)| name.as_str()).collect();
        write!(f, "Variables({names:?})")
    }
}

impl Variables {
    /// `values` by name.
    pub fn new<'a>(values: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Result<Self, String> {
        let values = values
            .into_iter()
            .map(|(name, value)| {
                let converted = kube_cel::cel::to_value(value)
                    .map_err(|error| format!("`{name}` is not representable in CEL: {error}"))?;
                Ok((name.to_owned(), converted))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { values })
    }
}

fn timestamp_value(at: Timestamp) -> Result<CelValue, String> {
    let utc =
        chrono::DateTime::from_timestamp(at.as_second(), at.subsec_nanosecond().unsigned_abs())
            .ok_or_else(|| format!("{at} is out of CEL's range"))?;
    Ok(CelValue::Timestamp(utc.fixed_offset()))
}

fn example(expect: Expect) -> &'static str {
    match expect {
        Expect::Condition => "write a condition on `object`, e.g. object.status.phase == \"Done\"",
        Expect::Time => "write a time from `object`, e.g. timestamp(object.status.finishedAt)",
    }
}

fn quoted(names: &[String]) -> String {
    let names: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    names.join(", ")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
