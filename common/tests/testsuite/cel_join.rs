//! What `join` writes for items that are not strings, estimated as it renders them.

use kube_retention_common::cel::{Budget, Expect, Expression};
use serde_json::json;

fn unlimited() -> Budget {
    Budget {
        cost: u64::MAX,
        time: std::time::Duration::MAX,
    }
}

/// `join` renders items that are not strings (kube-cel writes them with `Debug`: `Int(1)`,
/// `List([String("a")])`): the fuzz campaign found what follows it charged past the estimate,
/// which had taken such items for empty strings.
#[test]
fn a_join_of_items_that_are_not_strings_is_estimated_as_rendered() {
    let object = json!({"metadata": {"name": "a"}, "spec": {"s": "ab,".repeat(200)}});
    for source in [
        "[[\"a\", \"b\", \"a\"]].join(\"aab,é-\").matches(\"a.*b\")",
        "[[[]]].join(\"\").matches(\"(a|b)*c\")",
        "[1, 2, 3].join(',').matches('a')",
        "[{'a': 'b'}].join(',').matches('a')",
    ] {
        let expression = Expression::compile(source, Expect::Condition).unwrap();
        let (answer, spent) = expression.condition_costing(&object, unlimited());
        assert!(answer.is_ok(), "{source}: {answer:?}");
        assert!(
            spent <= expression.estimated_cost(),
            "{source}: spent {spent}, above its estimate {}",
            expression.estimated_cost()
        );
    }
    let rendered_findall =
        "[[object.spec.s, object.spec.s]].join(',,-ab').findAll('a|,').size() > 0";
    let refused = Expression::compile(rendered_findall, Expect::Condition).unwrap_err();
    assert!(refused.to_string().contains("above the limit"), "{refused}");
}
