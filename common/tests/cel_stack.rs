//! The stack CEL's recursion needs, measured: each of the deepest admitted shapes is compiled
//! and evaluated on a thread of its own, and the stack that thread touched is read from
//! `/proc/self/smaps` (a page of stack, once touched, stays resident). The figures print with
//! `--nocapture`; `make bench-cel-stack` prints them for a debug and a release build. The test
//! holds every shape to half of [`STACK_BYTES`], the stack every compilation and evaluation is
//! given: the other half is the margin.
//!
//! And the shapes run on a thread of [`SMALL`], which the deepest of them would not fit without
//! the stack [`kube_retention_common::cel::stack`] makes for them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement: its setup may fail loudly

use std::thread;

use kube_retention_common::cel::hostile::deepest_shapes;
use kube_retention_common::cel::stack::STACK_BYTES;
use kube_retention_common::cel::{Expect, Expression};
use serde_json::{Value, json};

/// A thread's stack far below what the deepest shapes use.
const SMALL: usize = 128 * 1024;

/// An object as deep as any shape reads: `{"a": {"a": …}}`.
fn deep_object() -> Value {
    let mut object = json!(1);
    for _ in 0..120 {
        object = json!({ "a": object });
    }
    object
}

fn compile_and_evaluate(source: &str, object: &Value) {
    // Refused at evaluation (a field missing, a type that differs) is an answer too; what is
    // measured is the way there.
    let expression = Expression::compile(source, Expect::Condition).expect("admitted");
    let _ = expression.condition(object);
    drop(expression);
}

/// The stack the calling thread has touched, in bytes.
fn touched_stack() -> usize {
    let marker = 0u8;
    let address = std::ptr::from_ref(&marker).addr();
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((start, end)) = range.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            inside = (start..end).contains(&address);
            continue;
        }
        if inside && let Some(kib) = line.strip_prefix("Rss:") {
            let kib: usize = kib
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse()
                .expect("kB");
            return kib * 1024;
        }
    }
    panic!("the stack's mapping is not in smaps");
}

fn peak_stack(work: impl FnOnce() + Send + 'static) -> usize {
    thread::Builder::new()
        .stack_size(4 * STACK_BYTES)
        .spawn(move || {
            work();
            touched_stack()
        })
        .expect("spawned")
        .join()
        .expect("joined")
}

#[test]
fn the_deepest_admitted_shapes_use_at_most_half_the_stack_they_are_given() {
    let baseline = peak_stack(|| {});
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("CEL's stack, {build} build (at most {STACK_BYTES} bytes given):");
    let mut deepest = 0;
    for (name, source) in deepest_shapes() {
        let object = deep_object();
        let peak = peak_stack(move || compile_and_evaluate(&source, &object));
        let peak = peak.saturating_sub(baseline);
        println!("  {name:<14} {:>6} KiB", peak / 1024);
        assert!(
            peak <= STACK_BYTES / 2,
            "{name} used {peak} bytes of stack, more than half of {STACK_BYTES}"
        );
        deepest = deepest.max(peak);
    }
    println!("  deepest        {:>6} KiB", deepest / 1024);
}

#[test]
fn on_a_small_thread_the_deepest_shapes_are_given_the_stack_they_need() {
    let object = std::sync::Arc::new(deep_object());
    for (name, source) in deepest_shapes() {
        let object = object.clone();
        let finished = thread::Builder::new()
            .stack_size(SMALL)
            .spawn(move || compile_and_evaluate(&source, &object))
            .expect("spawned")
            .join();
        assert!(finished.is_ok(), "{name}");
    }
}
