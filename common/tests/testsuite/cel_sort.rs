//! `sort()` on lists it cannot order: refused before it runs, with an error that says why.
//! kube-cel's sort takes items it cannot compare as equal, which is no order at all, and
//! Rust's sort panics on finding so; the fuzz campaign found a list of a string and numbers.

use kube_retention_common::cel::{Expect, Expression};
use serde_json::json;

fn evaluated(source: &str) -> Result<bool, String> {
    let object = json!({"spec": {"numbers": [3, 1, 2], "words": ["b", "a"], "nested": [[1], [2]]}});
    Expression::compile(source, Expect::Condition)
        .unwrap_or_else(|error| panic!("{source}: {error}"))
        .condition(&object)
        .map_err(|error| error.to_string())
}

#[test]
fn a_list_of_one_type_is_sorted() {
    for source in [
        "object.spec.numbers.sort() == [1, 2, 3]",
        "object.spec.words.sort() == ['a', 'b']",
        "[2.5, 1.5].sort() == [1.5, 2.5]",
        "[true, false].sort() == [false, true]",
        "[].sort() == []",
    ] {
        assert_eq!(evaluated(source), Ok(true), "{source}");
    }
}

#[test]
fn a_list_it_cannot_order_is_refused_with_the_reason() {
    for (source, reason) in [
        (
            "(object.spec.numbers + ['a']).sort() == []",
            "a string among ints",
        ),
        ("['a', 1].sort() == []", "a int among strings"),
        ("[1, 2u, 3.0].sort() == []", "a uint among ints"),
        ("[double('NaN'), 1.0].sort() == []", "cannot order NaN"),
    ] {
        let error = evaluated(source).expect_err(source);
        assert!(error.contains("sort() "), "{source}: {error}");
        assert!(error.contains(reason), "{source}: {error}");
        assert!(!error.contains("panic"), "{source}: {error}");
    }
}

#[test]
fn generated_mixed_lists_never_reach_the_sort() {
    // Every order of every pair of kinds, at several lengths: one type sorts, two never panic.
    let kinds = [
        "1", "2u", "1.5", "'a'", "true", "null", "[1]", "{'a': 1}", "b'x'",
    ];
    for first in kinds {
        for second in kinds {
            for repeat in [1, 2, 9] {
                let items: Vec<&str> = (0..repeat).flat_map(|_| [first, second]).collect();
                let source = format!("[{}].sort().size() >= 0", items.join(", "));
                let answer = evaluated(&source);
                if first == second {
                    continue;
                }
                let error = answer.expect_err(&source);
                assert!(
                    error.contains("sort() needs items of one type"),
                    "{source}: {error}"
                );
            }
        }
    }
}
