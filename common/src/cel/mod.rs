//! CEL expressions over `object`, as policies write them (`match`, `finished.*`): compiled once
//! with everything that can be known without an object checked — syntax, variables other than
//! `object`, functions the evaluator lacks, a result of the wrong type written outright — and
//! evaluated with Kubernetes' CEL library (kube-cel) on top of the standard one. Every
//! expression has a cost ([`cost`]): one estimated above [`COST_LIMIT`] does not compile, and
//! an evaluation that spends more than its [`Budget`] ([`meter`]) fails, never answering true.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::IdedExpr;
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
    /// The program with the cost meter's charges written in: what is evaluated.
    metered: IdedExpr,
    /// Its costed calls, which the meter charges before they run.
    sites: Arc<[Site]>,
    estimate: u64,
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

mod bindings;
mod check;
mod checks;
pub mod cost;
mod errors;
pub mod hostile;
pub mod meter;
mod patterns;
pub mod shape;
pub mod stack;
mod variables;

use bindings::timestamp_value;
pub use bindings::{ConversionError, Converted, Variables};
pub use check::Check;
use checks::{has_function, is_operator, wrong_result};
use cost::Site;
pub use cost::{ASSUMED_BYTES, ASSUMED_ITEMS, COST_LIMIT};
pub use errors::{CompileError, EvalError};
pub use meter::{Budget, Exceeded, TIME_BOUND, TIME_LIMIT, thousands};
pub use patterns::PATTERN_SIZE_LIMIT;
pub use shape::{MAX_DEPTH, MAX_SOURCE_BYTES, MAX_TOKENS};

thread_local! {
    static ROOT: Context<'static> = {
        let mut root = Context::default().with_all();
        patterns::register(&mut root);
        root.add_function(cost::CHARGE, meter::charge);
        root.add_function(cost::OPERAND, meter::operand);
        root
    };
}

impl Expression {
    /// Compiles `source` over `object`, or says what is wrong with it.
    pub fn compile(source: &str, expect: Expect) -> Result<Self, CompileError> {
        Self::compile_over(source, expect, &[VARIABLE])
    }

    /// Compiles `source` over the variables `declared`, or says what is wrong with it. Its size
    /// is bounded before it is parsed ([`shape`]), and everything after runs on a stack that
    /// covers the deepest admitted expression ([`stack`]).
    pub fn compile_over(
        source: &str,
        expect: Expect,
        declared: &[&str],
    ) -> Result<Self, CompileError> {
        if source.trim().is_empty() {
            return Err(CompileError::Empty(expect));
        }
        shape::check(source)?;
        stack::deep(|| {
            contained(|| Self::compile_bounded(source, expect, declared))
                .unwrap_or_else(|panic| Err(CompileError::Syntax(panic)))
        })
    }

    fn compile_bounded(
        source: &str,
        expect: Expect,
        declared: &[&str],
    ) -> Result<Self, CompileError> {
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
        let called: Vec<&str> = references
            .functions()
            .into_iter()
            .filter(|name| !is_operator(name))
            .collect();
        let missing: Vec<String> = called
            .iter()
            .filter(|name| !has_function(name))
            .map(|name| (*name).to_owned())
            .collect();
        if !missing.is_empty() {
            return Err(CompileError::Functions(missing));
        }
        let not_offered: Vec<String> = called
            .iter()
            .filter(|name| cost::rules::rule_of(name).is_none())
            .map(|name| (*name).to_owned())
            .collect();
        if !not_offered.is_empty() {
            return Err(CompileError::NotOffered(not_offered));
        }
        patterns::check(&program.expression().expr)?;
        if let Some(problem) = wrong_result(&program.expression().expr, expect) {
            return Err(CompileError::WrongResult { problem, expect });
        }
        let metered = cost::meter(program.expression());
        if metered.estimate > COST_LIMIT {
            return Err(CompileError::TooCostly {
                estimate: metered.estimate,
                limit: COST_LIMIT,
            });
        }
        Ok(Self {
            source: source.to_owned(),
            metered: metered.expr,
            sites: metered.sites.into(),
            estimate: metered.estimate,
            expect,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The most an evaluation can cost on an object within the assumed sizes ([`cost`]).
    pub fn estimated_cost(&self) -> u64 {
        self.estimate
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
        let (result, spent) = self.run(budget, |context| {
            context.add_variable_from_value(VARIABLE, object.0.clone());
        });
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
        let (result, _) = self.run(Budget::default(), |context| {
            for (name, value) in &variables.values {
                context.add_variable_from_value(name.clone(), value.clone());
            }
            if let Some((name, at)) = time {
                context.add_variable_from_value(name, at);
            }
        });
        match result? {
            CelValue::Bool(value) => Ok(value),
            other => Err(self.error(format!("gave {other:?}, not true or false"))),
        }
    }

    fn convert(&self, object: &Value) -> Result<Converted, EvalError> {
        Converted::new(object).map_err(|reason| self.error(reason.to_string()))
    }

    fn evaluate(&self, object: &Converted) -> Result<CelValue, EvalError> {
        let (result, _) = self.run(Budget::default(), |context| {
            context.add_variable_from_value(VARIABLE, object.0.clone());
        });
        result
    }

    /// Runs the metered program over the variables `bind` adds, within `budget`.
    fn run(
        &self,
        budget: Budget,
        bind: impl FnOnce(&mut Context<'_>),
    ) -> (Result<CelValue, EvalError>, u64) {
        let (result, spent, exceeded) = stack::deep(|| {
            meter::metered(budget, &self.sites, || {
                contained(|| {
                    ROOT.with(|root| {
                        let mut context = root.new_inner_scope();
                        bind(&mut context);
                        CelValue::resolve(&self.metered, &context)
                    })
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

/// Runs `work`, and answers a panic inside it (a fault of the interpreter's, never of the
/// expression's) as its message, so that one expression cannot end the thread that evaluates
/// every namespace's.
fn contained<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned())
    })
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
