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

/// kube-cel's quantity arithmetic overflows past what its `i128` holds; the workspace builds it
/// with overflow checks in every profile, so the evaluation answers an error rather than a
/// wrapped number (issue 57, read in code).
#[test]
fn quantity_arithmetic_past_its_range_fails_rather_than_wraps() {
    use kube_retention_common::cel::{Expect, Expression};
    for source in [
        r#"quantity("1e30").add(quantity("1n")).isGreaterThan(quantity("1"))"#,
        r#"quantity("1e30").sub(quantity("1n")).isLessThan(quantity("1"))"#,
        r#"quantity("1e30").compareTo(quantity("1n")) > 0"#,
    ] {
        let expression = Expression::compile(source, Expect::Condition).expect("compiles");
        let answer = expression.condition(&serde_json::json!({}));
        assert!(
            answer
                .as_ref()
                .is_err_and(|error| error.to_string().contains("overflow")),
            "{source}: {answer:?}"
        );
    }
}
