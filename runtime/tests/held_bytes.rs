//! [`held_bytes`] against what parsing actually allocates: generated JSON — maps of few
//! entries, long and short arrays, strings with escapes, deep nesting, and the shapes a tenant
//! would pick to make a small text hold much (a list of one-entry maps) — parsed under an
//! allocator that counts every byte asked for. The weight is never less than what the parse
//! left allocated with what glibc's allocator keeps beside each allocation, and at most three
//! times that (a map's nodes are charged as if each held the fewest entries a split leaves), so
//! the bounds that charge it neither let a tenant's object hold more than they say nor shed
//! everyday objects for nothing.
//!
//! Its own test binary, one test: the counting allocator (`stats_alloc`'s) is the binary's
//! global allocator, and its counts are the whole process's.

#![allow(clippy::unwrap_used)] // a test: generated JSON that does not parse may fail loudly

use std::alloc::System;

use kube::api::DynamicObject;
use kube_retention_runtime::held::{held_bytes, object_held_bytes};
use proptest::prelude::*;
use serde_json::Value;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// What `make` left allocated: bytes, allocations; and what it made.
fn counted<T>(make: impl FnOnce() -> T) -> (usize, usize, T) {
    let region = Region::new(ALLOCATOR);
    let made = make();
    // A reallocation counts its growth as allocated (and its shrinking as freed).
    let change = region.change();
    let bytes = change
        .bytes_allocated
        .saturating_sub(change.bytes_deallocated);
    let allocations = change.allocations.saturating_sub(change.deallocations);
    (bytes, allocations, made)
}

/// What parsing `text` left allocated, and the tree.
fn parsed(text: &str) -> (usize, usize, Value) {
    counted(|| serde_json::from_str(text).unwrap())
}

/// What decoding `text` as an object left allocated, and the object.
fn decoded(text: &str) -> (usize, usize, DynamicObject) {
    counted(|| serde_json::from_str(text).unwrap())
}

/// What glibc's allocator may keep beside an allocation at most: an 8-byte header and rounding
/// to 16 (musl's size classes keep less).
const OVERHEAD: usize = 24;

fn within(text: &str) -> Result<(), TestCaseError> {
    let (bytes, allocations, value) = parsed(text);
    let held = bytes + OVERHEAD * allocations;
    let weight = held_bytes(&value);
    let shown: String = text.chars().take(200).collect();
    prop_assert!(weight >= held, "weighed {weight} for {held} held: {shown}");
    prop_assert!(
        weight <= 3 * held,
        "weighed {weight} for {held} held: {shown}"
    );
    Ok(())
}

/// An object with generated metadata (labels, annotations, finalizers, owners) and data.
fn object() -> impl Strategy<Value = Value> {
    let texts = || prop::collection::btree_map("[a-z0-9./-]{1,40}", "\\PC{0,40}", 0..200);
    (
        texts(),
        texts(),
        prop::collection::vec("[a-z./-]{1,30}", 0..50),
        prop::collection::vec("[a-z0-9-]{1,30}", 0..20),
        json(),
    )
        .prop_map(|(labels, annotations, finalizers, owners, data)| {
            let owners: Vec<Value> = owners
                .iter()
                .map(|name| {
                    serde_json::json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                       "name": name, "uid": format!("uid-{name}"),
                                       "controller": true})
                })
                .collect();
            serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "job", "namespace": "team-a", "uid": "uid-job",
                             "resourceVersion": "7", "labels": labels,
                             "annotations": annotations, "finalizers": finalizers,
                             "ownerReferences": owners},
                "spec": data
            })
        })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,3}", "[a-zA-Z0-9._/-]{4,40}", "\\PC{0,8}",]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        "\\PC{0,64}".prop_map(Value::String),
        "[\"\\\\\n\t]{0,16}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 2_000, 40, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..40).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..30)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// What a tenant would write to make a small text hold much: `count` maps of `entries` each.
fn dense(count: usize, entries: usize) -> String {
    let map: Vec<String> = (0..entries).map(|n| format!("\"k{n}\":{n}")).collect();
    let map = format!("{{{}}}", map.join(","));
    format!("{{\"spec\":{{\"env\":[{}]}}}}", vec![map; count].join(","))
}

/// One test, so that nothing else allocates while a parse is counted (the counts are the whole
/// process's).
#[test]
fn weights_are_never_less_than_what_parsing_allocates() {
    use proptest::test_runner::{Config, TestRunner};

    let mut runner = TestRunner::new(Config::with_cases(500));
    runner
        .run(&json(), |value| {
            within(&serde_json::to_string(&value).unwrap())
        })
        .unwrap();
    let mut runner = TestRunner::new(Config::with_cases(100));
    runner
        .run(&object(), |value| {
            let text = serde_json::to_string(&value).unwrap();
            let (bytes, allocations, object) = decoded(&text);
            let held = bytes + OVERHEAD * allocations;
            let weight = object_held_bytes(&object);
            prop_assert!(weight >= held, "weighed {weight} for {held} held");
            prop_assert!(weight <= 3 * held, "weighed {weight} for {held} held");
            Ok(())
        })
        .unwrap();
    let mut runner = TestRunner::new(Config::with_cases(100));
    runner
        .run(&(1usize..3_000, 0usize..40), |(count, entries)| {
            within(&dense(count, entries))
        })
        .unwrap();

    // The reproduction's Jobs: 20,000 `env` entries of one field each.
    let env: Vec<String> = (0..20_000)
        .map(|n| format!("{{\"name\":\"E{n}\"}}"))
        .collect();
    let text = format!("{{\"spec\":{{\"env\":[{}]}}}}", env.join(","));
    let (bytes, allocations, value) = parsed(&text);
    let weight = held_bytes(&value);
    println!(
        "{} KiB of text: {} KiB allocated in {allocations} allocations, weighed {} KiB",
        text.len() / 1024,
        bytes / 1024,
        weight / 1024
    );
    assert!(weight >= bytes + OVERHEAD * allocations && bytes > 30 * text.len());
}
