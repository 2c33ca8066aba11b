//! Which variables an expression reads: those it does not bind itself. A macro's own variables
//! (`items.exists(r, r.ready)`) are bound inside its loop, not outside, so they are not the
//! expression's to declare.

use std::collections::BTreeSet;

use kube_cel::cel::common::ast::{EntryExpr, Expr};

/// The variables `expr` reads that it does not bind itself.
pub(super) fn free(expr: &Expr) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    free_variables(expr, &mut Vec::new(), &mut found);
    found
}

fn free_variables<'a>(expr: &'a Expr, bound: &mut Vec<&'a str>, free: &mut BTreeSet<String>) {
    match expr {
        Expr::Ident(name) => {
            if !bound.contains(&name.as_str()) {
                free.insert(name.clone());
            }
        }
        Expr::Select(select) => free_variables(&select.operand.expr, bound, free),
        Expr::Call(call) => {
            for argument in call.target.iter().map(|target| &**target).chain(&call.args) {
                free_variables(&argument.expr, bound, free);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                free_variables(&element.expr, bound, free);
            }
        }
        Expr::Map(map) => entries(map.entries.iter().map(|entry| &entry.expr), bound, free),
        Expr::Struct(fields) => {
            entries(fields.entries.iter().map(|entry| &entry.expr), bound, free)
        }
        Expr::Comprehension(loop_) => {
            free_variables(&loop_.iter_range.expr, bound, free);
            free_variables(&loop_.accu_init.expr, bound, free);
            let outer = bound.len();
            bound.push(&loop_.iter_var);
            bound.extend(loop_.iter_var2.as_deref());
            bound.push(&loop_.accu_var);
            for inside in [&loop_.loop_cond, &loop_.loop_step, &loop_.result] {
                free_variables(&inside.expr, bound, free);
            }
            bound.truncate(outer);
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    bound: &mut Vec<&'a str>,
    free: &mut BTreeSet<String>,
) {
    for entry in entries {
        match entry {
            EntryExpr::MapEntry(entry) => {
                free_variables(&entry.key.expr, bound, free);
                free_variables(&entry.value.expr, bound, free);
            }
            EntryExpr::StructField(field) => free_variables(&field.value.expr, bound, free),
        }
    }
}
