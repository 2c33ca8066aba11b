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

/// What an expression reads of `object`, and the object cut down to it: select chains read
/// their paths; `object` read any other way (bare, indexed, a macro's range) reads it whole,
/// unless a loop rebinds the name.
#[test]
fn an_expression_reads_its_select_chains_or_the_whole_object() {
    use kube_retention_common::cel::{Expect, Expression};
    let object = serde_json::json!({
        "kind": "Job",
        "metadata": {"name": "a", "labels": {"tier": "batch", "team": "x"},
                     "annotations": {"big": "x"}},
        "spec": {"x": 1, "y": [1, 2]},
        "status": {"succeeded": 1}
    });
    let cut = |source: &str| {
        let expression = Expression::compile(source, Expect::Condition).expect(source);
        expression.reads().project(&object)
    };
    assert_eq!(
        cut(r#"object.metadata.labels["tier"] == "batch""#),
        serde_json::json!({"metadata": {"labels": {"tier": "batch", "team": "x"}}})
    );
    assert_eq!(
        cut("has(object.spec.x) && object.status.succeeded == 1"),
        serde_json::json!({"spec": {"x": 1}, "status": {"succeeded": 1}})
    );
    assert_eq!(cut("has(object.spec.z)"), serde_json::json!({"spec": {}}));
    // A shorter path covers a longer one.
    assert_eq!(
        cut("object.spec.x == 1 && size(object.spec) > 0"),
        serde_json::json!({"spec": {"x": 1, "y": [1, 2]}})
    );
    for whole in [
        "object != null",
        r#"object["kind"] == "Job""#,
        "[object, object] != []",
        "object.exists(k, k == 'kind')",
    ] {
        assert_eq!(cut(whole), object, "{whole}");
    }
    // A loop's own `object` is not the object.
    assert_eq!(
        cut("[1].all(object, object > 0) && object.kind == 'Job'"),
        serde_json::json!({"kind": "Job"})
    );
}
