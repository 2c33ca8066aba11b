//! Regular expressions (`matches`, `find`, `findAll`): a pattern must be a string literal, and
//! it is compiled when the expression is admitted, under [`PATTERN_SIZE_LIMIT`], so a pattern
//! that is slow to compile or large once compiled is refused there. At run time the interpreter's
//! own functions would compile the pattern again at every call (in a loop, once per item); the
//! ones registered here take it from a cache per thread, which only ever holds admitted
//! patterns. The `regex` crate matches in time linear in the text, whatever the pattern.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::common::ast::{Expr, LiteralValue};
use kube_cel::cel::extractors::{Arguments, This};
use kube_cel::cel::{Context, ExecutionError, ResolveResult, Value};
use regex::{Regex, RegexBuilder};

use super::errors::CompileError;

/// The most memory a compiled pattern may take (the `regex` crate's `size_limit`; its default
/// is 10 MiB).
pub const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

/// The functions that take a pattern.
const TAKE_PATTERNS: [&str; 3] = ["matches", "find", "findAll"];

/// Patterns kept compiled per thread; past this many the cache starts again (only admitted
/// patterns reach it).
const CACHED: usize = 512;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Arc<Regex>>> = RefCell::new(HashMap::new());
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

/// Every call in `expr` that takes a pattern is given a literal one that compiles.
pub(super) fn check(expr: &Expr) -> Result<(), CompileError> {
    let mut result = Ok(());
    visit(expr, &mut |expr| {
        let Expr::Call(call) = expr else { return };
        let function = call.func_name.as_str();
        if result.is_err() || !TAKE_PATTERNS.contains(&function) {
            return;
        }
        let pattern = call.args.get(usize::from(call.target.is_none()));
        result = match pattern.map(|pattern| &pattern.expr) {
            Some(Expr::Literal(LiteralValue::String(pattern))) => build(pattern.inner())
                .map(|_| ())
                .map_err(|error| CompileError::Pattern {
                    function: function.to_owned(),
                    pattern: pattern.inner().to_owned(),
                    reason: error
                        .to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                }),
            _ => Err(CompileError::PatternNotLiteral {
                function: function.to_owned(),
            }),
        };
    });
    result
}

/// Calls `each` on every node of `expr`.
fn visit(expr: &Expr, each: &mut impl FnMut(&Expr)) {
    each(expr);
    match expr {
        Expr::Call(call) => {
            for operand in call.target.iter().map(|target| &**target).chain(&call.args) {
                visit(&operand.expr, each);
            }
        }
        Expr::Select(select) => visit(&select.operand.expr, each),
        Expr::Comprehension(loop_) => {
            for part in [
                &loop_.iter_range,
                &loop_.accu_init,
                &loop_.loop_cond,
                &loop_.loop_step,
                &loop_.result,
            ] {
                visit(&part.expr, each);
            }
        }
        Expr::List(list) => list
            .elements
            .iter()
            .for_each(|item| visit(&item.expr, each)),
        Expr::Map(map) => map
            .entries
            .iter()
            .for_each(|entry| visit_entry(entry, each)),
        Expr::Struct(fields) => fields
            .entries
            .iter()
            .for_each(|entry| visit_entry(entry, each)),
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
    }
}

fn visit_entry(entry: &kube_cel::cel::common::ast::IdedEntryExpr, each: &mut impl FnMut(&Expr)) {
    use kube_cel::cel::common::ast::EntryExpr;
    match &entry.expr {
        EntryExpr::MapEntry(entry) => {
            visit(&entry.key.expr, each);
            visit(&entry.value.expr, each);
        }
        EntryExpr::StructField(field) => visit(&field.value.expr, each),
    }
}

/// The compiled `pattern`, from the cache.
fn compiled(function: &str, pattern: &str) -> Result<Arc<Regex>, ExecutionError> {
    COMPILED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(regex) = cache.get(pattern) {
            return Ok(regex.clone());
        }
        let regex = build(pattern)
            .map(Arc::new)
            .map_err(|error| ExecutionError::function_error(function, error.to_string()))?;
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(pattern.to_owned(), regex.clone());
        Ok(regex)
    })
}

/// Registers the pattern functions over the interpreter's own.
pub(super) fn register(context: &mut Context<'_>) {
    context.add_function("matches", matches);
    context.add_function("find", find);
    context.add_function("findAll", find_all);
}

fn matches(This(text): This<Arc<String>>, pattern: Arc<String>) -> Result<bool, ExecutionError> {
    Ok(compiled("matches", &pattern)?.is_match(&text))
}

fn find(This(text): This<Arc<String>>, pattern: Arc<String>) -> ResolveResult {
    let regex = compiled("find", &pattern)?;
    let found = regex.find(&text).map(|m| m.as_str().to_owned());
    Ok(Value::String(Arc::new(found.unwrap_or_default())))
}

fn find_all(This(text): This<Arc<String>>, Arguments(args): Arguments) -> ResolveResult {
    let Some(Value::String(pattern)) = args.first() else {
        return Err(ExecutionError::function_error(
            "findAll",
            "expected a string pattern",
        ));
    };
    let regex = compiled("findAll", pattern)?;
    let limit = match args.get(1) {
        Some(Value::Int(n)) if *n >= 0 => usize::try_from(*n).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    let found = regex
        .find_iter(&text)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}
