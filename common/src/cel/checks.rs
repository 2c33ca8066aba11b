//! What can be told about an expression before any object is seen: whether a name is an operator
//! or macro rather than a function, whether the evaluator has a function, and a result of the
//! wrong type written outright.

use kube_cel::cel::common::ast::{Expr, LiteralValue};
use kube_cel::cel::{ExecutionError, Program};

use super::{Expect, ROOT};

/// Operators (`_==_`, `!_`) and the macros the parser expands are not library functions.
pub(super) fn is_operator(name: &str) -> bool {
    name.starts_with('_')
        || name.ends_with('_')
        || matches!(
            name,
            "has"
                | "all"
                | "exists"
                | "exists_one"
                | "map"
                | "filter"
                | "@in"
                | "@not_strictly_false"
        )
}

/// Whether the evaluator has `name`: calling it with no arguments fails on the arguments, not on
/// an undeclared reference, when it does.
pub(super) fn has_function(name: &str) -> bool {
    let Ok(probe) = Program::compile(&format!("{name}()")) else {
        return true;
    };
    ROOT.with(|root| {
        !matches!(probe.execute(root), Err(ExecutionError::UndeclaredReference(ref missing)) if missing.as_str() == name)
    })
}

/// A result of the wrong type written outright (a literal, arithmetic, a comparison).
pub(super) fn wrong_result(expr: &Expr, expect: Expect) -> Option<&'static str> {
    let condition = match expr {
        Expr::Literal(LiteralValue::Boolean(_)) => true,
        Expr::Literal(_) | Expr::List(_) | Expr::Map(_) => false,
        Expr::Call(call) => match call.func_name.as_str() {
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_&&_" | "_||_" | "!_" | "@in" => {
                true
            }
            "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "-_" | "timestamp" | "duration" | "string"
            | "int" | "double" | "size" => false,
            _ => return None,
        },
        _ => return None,
    };
    match (expect, condition) {
        (Expect::Condition, false) => Some("gives a value, not true or false"),
        (Expect::Time, true) => Some("gives true or false, not a time"),
        _ => None,
    }
}
