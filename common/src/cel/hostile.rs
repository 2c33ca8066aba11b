//! Expressions at the edge of what is admitted, as a hostile namespace editor would write them:
//! for the tests that prove the bounds hold and for the tool that measures the stack
//! (`kube-retention-bench`'s `cel-stack`). Each shape is built to measure just within
//! [`MAX_DEPTH`], so each is admitted by the shape check and reaches as deep as anything can.

use super::shape::{MAX_DEPTH, measure_depth};

/// Repeats `step` around `seed`, wrapped by `wrap`, until one more would pass [`MAX_DEPTH`].
fn deepest(seed: &str, step: impl Fn(&str) -> String, wrap: impl Fn(&str) -> String) -> String {
    let mut source = seed.to_owned();
    loop {
        let next = step(&source);
        if measure_depth(&wrap(&next)).is_none_or(|depth| depth > MAX_DEPTH) {
            return wrap(&source);
        }
        source = next;
    }
}

fn itself(source: &str) -> String {
    source.to_owned()
}

/// The deepest expression of each shape: operator chains, brackets, calls, member and index
/// chains, unary operators, conditionals, macros inside macros, and a mixture.
pub fn deepest_shapes() -> Vec<(&'static str, String)> {
    vec![
        (
            "sum chain",
            deepest("1 > 0", |s| format!("1 + {s}"), itself),
        ),
        (
            "product chain",
            deepest("1 > 0", |s| format!("2 * {s}"), itself),
        ),
        (
            "relations",
            deepest("1 < 2", |s| format!("{s} == true"), itself),
        ),
        ("brackets", deepest("true", |s| format!("({s})"), itself)),
        (
            "calls",
            deepest("1", |s| format!("int({s})"), |s| format!("{s} > 0")),
        ),
        (
            "sizes",
            deepest("size([]) == 0", |s| format!("size([{s}]) == 1"), itself),
        ),
        (
            "lists",
            deepest(
                "[true]",
                |s| format!("[{s}]"),
                |s| format!("{s}.size() > 0"),
            ),
        ),
        (
            "maps",
            deepest(
                "{1: true}",
                |s| format!("{{1: {s}}}"),
                |s| format!("{s}.size() > 0"),
            ),
        ),
        (
            "members",
            deepest("object.a", |s| format!("{s}.a"), |s| format!("has({s})")),
        ),
        (
            "indexes",
            deepest(
                "object[\"a\"] == 1",
                |s| s.replacen("object", "object[\"a\"]", 1),
                itself,
            ),
        ),
        ("negations", deepest("true", |s| format!("!{s}"), itself)),
        (
            "minuses",
            deepest("-1 < 0", |s| format!("-{s}").replace("--", "- -"), itself),
        ),
        (
            "conditionals",
            deepest("true", |s| format!("false ? false : {s}"), itself),
        ),
        (
            "macros",
            deepest("x > 0", |s| format!("[1].all(x, {s})"), itself),
        ),
        (
            "mixed",
            deepest(
                "true",
                |s| format!("[1, 2].exists(v, v + 1 + 1 > 0 && ({s}))"),
                itself,
            ),
        ),
    ]
}
