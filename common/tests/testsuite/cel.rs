//! Which variables an expression may read: those declared, and those its own macros bind.

use kube_retention_common::cel::{CompileError, Expect, Expression};
use serde_json::json;

#[test]
fn a_macros_own_variable_is_not_a_free_one() {
    let ready = "object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')";
    let expression = Expression::compile(ready, Expect::Condition).unwrap();
    let object = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    assert!(expression.condition(&object).unwrap());
    let nested = "object.items.all(i, i.parts.exists(p, p == i.name))";
    assert!(Expression::compile(nested, Expect::Condition).is_ok());
}

#[test]
fn a_variable_used_outside_its_macro_is_unknown() {
    let leaked = "object.items.exists(c, c.ready) && c.ready";
    assert_eq!(
        Expression::compile(leaked, Expect::Condition).unwrap_err(),
        CompileError::Variables(vec!["c".to_owned()])
    );
}

#[test]
fn declared_variables_are_named_when_another_is_used() {
    let error = Expression::compile_over(
        "pods.items.size() > 0 && x",
        Expect::Condition,
        &["pods", "time"],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "uses `x`, which is not a variable here: the variables are `pods`, `time`"
    );
}
