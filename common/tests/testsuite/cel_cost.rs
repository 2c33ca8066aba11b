//! The CEL cost model: what admission refuses, what it lets through, and that an evaluation never
//! spends more than the estimate on an object within the assumed sizes — nor, beyond them, more
//! than the limit.

use std::time::Duration;

use kube_retention_common::cel::{
    ASSUMED_ITEMS, Budget, COST_LIMIT, CompileError, Exceeded, Expect, Expression,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// `depth` loops over ten items, one inside the other: ten to the `depth` runs of the body.
fn nested(depth: usize) -> String {
    let mut source = String::from("v0 >= 0");
    for level in (0..depth).rev() {
        source = format!("[0,1,2,3,4,5,6,7,8,9].all(v{level}, {source})");
    }
    source
}

fn unlimited() -> Budget {
    Budget {
        cost: u64::MAX,
        time: Duration::MAX,
    }
}

#[test]
fn six_loops_deep_is_refused_naming_the_estimate_and_the_limit() {
    let source = nested(6);
    let error = Expression::compile(&source, Expect::Condition).expect_err("refused");
    let CompileError::TooCostly { estimate, limit } = error else {
        panic!("refused for its cost, not {error:?}");
    };
    assert!(estimate > 8_000_000, "{estimate}");
    assert_eq!(limit, COST_LIMIT);
    let text = error.to_string();
    assert!(
        text.contains("has an estimated cost of 8,999,994, above the limit of 1,000,000"),
        "{text}"
    );
}

#[test]
fn five_loops_deep_is_admitted_and_spends_exactly_its_estimate() {
    let expression = Expression::compile(&nested(5), Expect::Condition).expect("admitted");
    let (result, spent) = expression.condition_costing(&json!({}), unlimited());
    assert_eq!(result, Ok(true));
    assert_eq!(spent, expression.estimated_cost());
    assert!(spent <= COST_LIMIT);
}

#[test]
fn everyday_expressions_are_admitted() {
    for source in [
        r#"object.status.conditions.exists(c, c.type == "Succeeded" && c.status == "True")"#,
        r#"object.metadata.name.startsWith("ci-")"#,
        r#"object.metadata.labels["team"] == "a""#,
        r#"has(object.metadata.annotations) && "keep" in object.metadata.annotations"#,
        r#"object.spec.containers.all(c, c.image.startsWith("registry.example/"))"#,
        r#"object.status.phase in ["Failed", "Error"]"#,
    ] {
        let expression = Expression::compile(source, Expect::Condition);
        assert!(expression.is_ok(), "{source}: {expression:?}");
    }
    let at = Expression::compile("timestamp(object.status.finishedAt)", Expect::Time);
    assert!(at.is_ok(), "{at:?}");
}

#[test]
fn three_loops_deep_over_the_object_are_refused() {
    let two = "object.items.all(a, object.items.all(b, a != b))";
    assert!(Expression::compile(two, Expect::Condition).is_ok());
    let source = "object.items.all(a, object.items.all(b, object.items.all(c, a != b && b != c)))";
    let error = Expression::compile(source, Expect::Condition).expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("above the limit of 1,000,000"), "{text}");
    assert!(text.contains("assumed to hold up to 256 items"), "{text}");
}

#[test]
fn beyond_the_assumed_sizes_the_limit_stops_the_evaluation() {
    let expression =
        Expression::compile(r#"object.items.exists(x, x == "never")"#, Expect::Condition)
            .expect("admitted");
    let many = ASSUMED_ITEMS as usize * 2_000;
    let object = json!({"items": vec!["x"; many]});
    // The cost limit alone (an unoptimised build may reach the time limit first).
    let budget = Budget {
        cost: COST_LIMIT,
        time: Duration::MAX,
    };
    let (result, spent) = expression.condition_costing(&object, budget);
    let error = result.expect_err("stopped");
    assert_eq!(error.exceeded(), Some(Exceeded::Cost { limit: COST_LIMIT }));
    assert!(
        error
            .to_string()
            .contains("exceeded the cost limit of 1,000,000")
    );
    assert!(spent < COST_LIMIT + 100, "unwound at once: spent {spent}");
    // With the default budget, one limit or the other.
    let error = expression.condition(&object).expect_err("stopped");
    assert!(error.exceeded().is_some(), "{error}");
}

#[test]
fn an_exceeded_limit_is_never_true_even_where_or_would_absorb_the_error() {
    let source = r#"object.items.exists(x, x == "never") || true"#;
    let expression = Expression::compile(source, Expect::Condition).expect("admitted");
    let object = json!({"items": vec!["x"; ASSUMED_ITEMS as usize * 2_000]});
    let result = expression.condition(&object);
    assert!(
        result
            .as_ref()
            .is_err_and(|error| error.exceeded().is_some()),
        "{result:?}"
    );
}

#[test]
fn the_time_limit_stops_what_the_cost_limit_lets_run() {
    let expression = Expression::compile(&nested(5), Expect::Condition).expect("admitted");
    let budget = Budget {
        cost: u64::MAX,
        time: Duration::from_micros(50),
    };
    let (result, _) = expression.condition_costing(&json!({}), budget);
    let error = result.expect_err("stopped");
    assert!(
        matches!(error.exceeded(), Some(Exceeded::Time { .. })),
        "{error}"
    );
}

#[test]
fn within_the_limit_an_evaluation_is_unchanged() {
    let expression = Expression::compile(
        r#"object.status.conditions.exists(c, c.type == "Succeeded")"#,
        Expect::Condition,
    )
    .expect("admitted");
    let object = json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Succeeded"}]}});
    assert_eq!(expression.condition(&object), Ok(true));
    let object = json!({"status": {"conditions": [{"type": "Ready"}]}});
    assert_eq!(expression.condition(&object), Ok(false));
}

// Generated expressions over generated objects within the assumed sizes: the estimate bounds
// what an evaluation spends. Loop variables are named by depth, so loops nest freely.

fn text(depth: u32, vars: Vec<String>) -> BoxedStrategy<String> {
    let mut leaves = vec![
        Just("object.metadata.name".to_owned()).boxed(),
        Just("object.spec.s".to_owned()).boxed(),
        Just(r#"object.metadata.labels["team"]"#.to_owned()).boxed(),
        "[a-z]{0,12}"
            .prop_map(|literal| format!("{literal:?}"))
            .boxed(),
    ];
    for var in vars.iter().cloned() {
        leaves.push(Just(var).boxed());
    }
    let leaf = prop::strategy::Union::new(leaves).boxed();
    if depth == 0 {
        return leaf;
    }
    prop_oneof![
        leaf,
        (text(depth - 1, vars.clone()), "[a-z]{0,4}")
            .prop_map(|(inner, suffix)| format!("({inner} + {suffix:?})")),
        text(depth - 1, vars.clone()).prop_map(|inner| format!("{inner}.lowerAscii()")),
        list(depth - 1, vars).prop_map(|inner| format!("{inner}.join(\"-\")")),
    ]
    .boxed()
}

fn list(depth: u32, vars: Vec<String>) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("object.spec.items".to_owned()),
        Just(r#"["a", "bb", "ccc"]"#.to_owned()),
    ]
    .boxed();
    if depth == 0 {
        return leaf;
    }
    let var = format!("v{}", vars.len());
    let mut inner = vars.clone();
    inner.push(var.clone());
    prop_oneof![
        leaf,
        (list(depth - 1, vars.clone()), list(depth - 1, vars.clone()))
            .prop_map(|(a, b)| format!("({a} + {b})")),
        text(depth - 1, vars.clone()).prop_map(|inner| format!("{inner}.split(\"a\")")),
        (
            list(depth - 1, vars.clone()),
            text(depth - 1, inner.clone())
        )
            .prop_map(move |(range, body)| format!("{range}.map({var}, {body})")),
    ]
    .boxed()
}

fn condition(depth: u32, vars: Vec<String>) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("true".to_owned()),
        Just("has(object.spec.s)".to_owned()),
        (text(0, vars.clone()), text(0, vars.clone())).prop_map(|(a, b)| format!("{a} == {b}")),
        (text(0, vars.clone()), "[a-z]{0,3}")
            .prop_map(|(a, prefix)| format!("{a}.startsWith({prefix:?})")),
        (text(0, vars.clone()), list(0, vars.clone())).prop_map(|(a, l)| format!("{a} in {l}")),
    ]
    .boxed();
    if depth == 0 {
        return leaf;
    }
    let var = format!("v{}", vars.len());
    let mut inner = vars.clone();
    inner.push(var.clone());
    let each = var.clone();
    prop_oneof![
        leaf,
        (
            condition(depth - 1, vars.clone()),
            condition(depth - 1, vars.clone())
        )
            .prop_map(|(a, b)| format!("({a} && {b})")),
        (
            condition(depth - 1, vars.clone()),
            condition(depth - 1, vars.clone())
        )
            .prop_map(|(a, b)| format!("({a} || !{b})")),
        (
            list(depth - 1, vars.clone()),
            condition(depth - 1, inner.clone())
        )
            .prop_map(move |(range, body)| format!("{range}.all({each}, {body})")),
        (list(depth - 1, vars.clone()), condition(depth - 1, inner))
            .prop_map(move |(range, body)| format!("{range}.exists({var}, {body})")),
        (text(depth - 1, vars.clone()), text(depth - 1, vars))
            .prop_map(|(a, b)| format!("{a}.contains({b})")),
    ]
    .boxed()
}

/// Objects within the assumed sizes and Kubernetes' own bounds on metadata.
fn object() -> impl Strategy<Value = Value> {
    (
        "[a-z0-9-]{1,253}",
        "[a-z]{0,63}",
        prop::option::of("[a-z]{0,300}"),
        prop::collection::vec("[a-c]{0,40}", 0..60),
    )
        .prop_map(|(name, team, s, items)| {
            let mut spec = json!({"items": items});
            if let Some(s) = s {
                spec["s"] = json!(s);
            }
            json!({"metadata": {"name": name, "labels": {"team": team}}, "spec": spec})
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn an_evaluation_never_spends_more_than_the_estimate(
        source in condition(3, Vec::new()),
        object in object(),
    ) {
        let Ok(expression) = Expression::compile(&source, Expect::Condition) else {
            return Ok(());
        };
        let (_, spent) = expression.condition_costing(&object, unlimited());
        prop_assert!(
            spent <= expression.estimated_cost(),
            "{source}: spent {spent}, estimated {}",
            expression.estimated_cost()
        );
    }
}
