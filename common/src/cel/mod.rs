//! CEL expressions over `object`, as policies write them (`match`, `finished.*`): compiled once
//! with everything that can be known without an object checked — syntax, variables other than
//! `object`, functions the evaluator lacks, a result of the wrong type written outright — and
//! evaluated with Kubernetes' CEL library (kube-cel) on top of the standard one. Every
//! expression has a cost ([`cost`]): one estimated above [`COST_LIMIT`] does not compile, and
//! an evaluation that spends more than its [`Budget`] ([`meter`]) fails, never answering true.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::IdedExpr;
use kube_cel::cel::{Context, Program};

/// The next [`Expression::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The only variable an expression may use.
pub const VARIABLE: &str = "object";

/// What an expression must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Expect {
    /// True or false (`match`, `finished.succeeded`, `finished.failed`).
    Condition,
    /// A timestamp (`finished.at`).
    Time,
}

pub struct Expression {
    /// Which compilation this is: a process-wide number, never reused, by which an evaluator
    /// elsewhere (the controller's sandbox) knows the expression it compiled from the same
    /// source once, and one overrun stops this compilation only (a policy's next generation
    /// compiles afresh).
    id: u64,
    source: String,
    /// The variables it was compiled over.
    declared: Arc<[String]>,
    /// What of `object` it reads.
    reads: Reads,
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
mod conversion;
pub mod cost;
mod errors;
mod evaluation;
pub mod hostile;
mod interpreter;
mod measure;
pub mod meter;
mod patterns;
mod reads;
pub mod shape;
mod sorting;
pub mod speed;
pub mod stack;
mod variables;

pub use bindings::{ConversionError, Converted, Variables};
pub use check::Check;
use checks::{has_function, is_operator, wrong_result};
use cost::Site;
pub use cost::{ASSUMED_BYTES, ASSUMED_ITEMS, COST_LIMIT};
pub use errors::{CompileError, EvalError};
pub use interpreter::{Answer, InProcess, Interpreter};
pub use measure::{COPY_NANOS, CopyNanos};
pub use meter::{Budget, Exceeded, NANOS_PER_UNIT, Overrun, TIME_BOUND, TIME_LIMIT, thousands};
pub use patterns::PATTERN_SIZE_LIMIT;
pub use reads::Reads;
pub use shape::{MAX_DEPTH, MAX_SOURCE_BYTES, MAX_TOKENS};

/// A context with every function an expression may call and the meter's own: what
/// evaluations run in (a scope of it, with the variables bound: [`bindings`]).
fn root() -> Context<'static> {
    let mut root = Context::default().with_all();
    patterns::register(&mut root);
    root.add_function(cost::CHARGE, meter::charge);
    root.add_function(cost::OPERAND, meter::operand);
    root.add_function(cost::SELECT, meter::select);
    root
}

thread_local! {
    /// The functions on offer, for asking whether one exists ([`checks`]).
    static ROOT: Context<'static> = root();
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
            .filter(|name| cost::offered::rule_of(name).is_none())
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
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            source: source.to_owned(),
            declared: declared.iter().map(|name| (*name).to_owned()).collect(),
            reads: Reads::of(&program.expression().expr),
            metered: metered.expr,
            sites: metered.sites.into(),
            estimate: metered.estimate,
            expect,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// This compilation's number, unique in the process ([`Expression::id`]'s field says why).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The variables it was compiled over.
    pub fn declared(&self) -> &[String] {
        &self.declared
    }

    /// What it must produce.
    pub fn expect(&self) -> Expect {
        self.expect
    }

    /// What of `object` it reads.
    pub fn reads(&self) -> &Reads {
        &self.reads
    }

    /// The most an evaluation can cost on an object within the assumed sizes ([`cost`]).
    pub fn estimated_cost(&self) -> u64 {
        self.estimate
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
