//! A grammar-based fuzz campaign of hostile CEL: typed expressions over every function the
//! evaluator offers, with operators, macros inside macros, long chains and deep nesting, some
//! past the admitted bounds; each compiled, and each admitted one evaluated on an object from a
//! pool that runs from small to past etcd's 1.5 MiB object limit. Asserted for every case:
//! - no panic: compilation and evaluation contain the interpreter's panics, and the campaign
//!   fails on any it finds contained;
//! - time: the evaluation's CPU time is within [`TIME_BOUND`] (release builds; a debug build
//!   is ten times slower and is not held to it);
//! - memory: the most it held at once is within [`MEMORY_BOUND`] (measured where the case
//!   raised the process's highest mark, which any case past the bound does);
//! - cost: the meter never lets an evaluation past the limit answer, and on an object within
//!   the assumed sizes it never spends more than the estimate.
//!
//! `FUZZ_CEL_CASES` sets the number of cases (a debug `cargo test` runs 300, a release build
//! 3,000 — `make test` runs that, as `make fuzz-cel-short` — and `make fuzz-cel` a million),
//! `FUZZ_CEL_SEED` the seed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a campaign: its setup may fail loudly

mod counting;
mod fuzz;

use std::time::Instant;

use counting::{alone, measured};
use fuzz::{Generator, Object, objects};
use kube_retention_common::cel::{Budget, COST_LIMIT, Expect, Expression, TIME_BOUND};

/// The most one evaluation may hold at once beyond the object it judges: what the cost limit
/// lets it make, and the copies of its operands the interpreter makes at each call.
const MEMORY_BOUND: usize = 96 * 1024 * 1024;

fn cases() -> u64 {
    let default = if cfg!(debug_assertions) { 300 } else { 3_000 };
    std::env::var("FUZZ_CEL_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("FUZZ_CEL_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(38)
}

#[derive(Default)]
struct Tally {
    admitted: u64,
    refused: u64,
    answered: u64,
    failed: u64,
    exceeded: u64,
    slowest: std::time::Duration,
    most_held: usize,
    faults: Vec<String>,
}

fn check(tally: &mut Tally, source: &str, object: &Object) {
    let expression = match Expression::compile(source, Expect::Condition) {
        Ok(expression) => expression,
        Err(error) => {
            let text = error.to_string();
            if text.contains("panic") {
                tally.faults.push(format!("compiling {source:?}: {text}"));
            }
            tally.refused += 1;
            return;
        }
    };
    tally.admitted += 1;
    let started = cpu_time::ThreadTime::now();
    let ((result, spent), usage) =
        measured(|| expression.condition_costing_converted(&object.converted, Budget::default()));
    let took = started.elapsed();
    tally.slowest = tally.slowest.max(took);
    tally.most_held = tally.most_held.max(usage.peak.unwrap_or(0));
    let name = &object.name;
    match &result {
        Ok(_) => tally.answered += 1,
        Err(error) if error.exceeded().is_some() => tally.exceeded += 1,
        Err(error) => {
            tally.failed += 1;
            if error.to_string().contains("inside the interpreter") {
                tally.faults.push(format!("{source:?} on {name}: {error}"));
            }
        }
    }
    if result.is_ok() && spent > COST_LIMIT {
        tally.faults.push(format!(
            "{source:?} on {name}: answered after spending {spent}"
        ));
    }
    if object.within_assumptions && spent > expression.estimated_cost() {
        tally.faults.push(format!(
            "{source:?} on {name}: spent {spent}, above its estimate {}",
            expression.estimated_cost()
        ));
    }
    if let Some(peak) = usage.peak.filter(|peak| *peak > MEMORY_BOUND) {
        tally
            .faults
            .push(format!("{source:?} on {name}: held {peak} bytes"));
    }
    if !cfg!(debug_assertions) && took > TIME_BOUND {
        tally
            .faults
            .push(format!("{source:?} on {name}: took {took:?} of CPU"));
    }
}

#[test]
fn hostile_expressions_stay_within_their_bounds() {
    let _alone = alone();
    let objects = objects();
    let mut generator = Generator::new(seed());
    let mut tally = Tally::default();
    let cases = cases();
    let started = Instant::now();
    for _ in 0..cases {
        let source = generator.expression();
        let object = &objects[generator.below(objects.len())];
        check(&mut tally, &source, object);
        if tally.faults.len() >= 20 {
            break;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{cases} cases (seed {}) in {elapsed:?}, {:.0} a second: {} admitted ({} answered, {} \
         failed, {} stopped at a limit), {} refused; slowest {:?} of CPU, most held {} KiB",
        seed(),
        cases as f64 / elapsed.as_secs_f64(),
        tally.admitted,
        tally.answered,
        tally.failed,
        tally.exceeded,
        tally.refused,
        tally.slowest,
        tally.most_held / 1024,
    );
    assert!(
        tally.faults.is_empty(),
        "{} faults:\n{}",
        tally.faults.len(),
        tally.faults.join("\n")
    );
    assert!(
        tally.admitted > cases / 10,
        "too few admitted to test anything"
    );
    assert!(
        tally.answered > 0 && tally.exceeded > 0,
        "no answers or no limits reached"
    );
}
