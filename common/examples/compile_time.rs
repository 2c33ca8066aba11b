//! What compiling the costliest expressions admission lets through takes: the figure behind
//! compiling policies' and Cleaners' expressions off the controller's loops (the controller's
//! `evaluator/compile.rs`). `cargo run --release -p kube-retention-common --example
//! compile_time`; each expression is compiled 50 times, and the median is printed with the time
//! the parser alone took.

use std::time::{Duration, Instant};

use kube_retention_common::cel::{Expect, Expression, MAX_SOURCE_BYTES};

const RUNS: usize = 50;

/// `head` followed by as many `term`s as fit the source bound, and at most `terms` of them
/// (the token bound, 1,024, is met first by short terms).
fn filled(head: &str, term: &str, terms: usize) -> String {
    let mut source = head.to_owned();
    for _ in 0..terms {
        if source.len() + term.len() >= MAX_SOURCE_BYTES {
            break;
        }
        source.push_str(term);
    }
    source
}

fn median(mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn main() {
    let literals = format!(" || '{}' == 'b'", "a".repeat(40));
    let sources = [
        (
            "a `||` chain of long literals",
            filled("object.metadata.name.size() > 0", &literals, usize::MAX),
        ),
        (
            "a `||` chain of calls",
            filled(
                "object.metadata.name.size() > 0",
                " || object.kind.endsWith('x')",
                110,
            ),
        ),
        (
            "an `&&` chain of comparisons",
            filled("object.metadata.name.size() > 0", " && 1 < 2", 250),
        ),
    ];
    for (what, source) in &sources {
        let outcome = Expression::compile(source, Expect::Condition)
            .map(|_| "admitted".to_owned())
            .unwrap_or_else(|error| format!("refused: {error}"));
        let compile = median(|| {
            Expression::compile(source, Expect::Condition).ok();
        });
        let parse = median(|| {
            kube_cel::cel::Program::compile(source).ok();
        });
        println!(
            "{what}: {} bytes, {outcome}; compiled in {compile:.2?} (parsing {parse:.2?})",
            source.len()
        );
    }
}
