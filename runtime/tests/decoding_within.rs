//! [`Within`] against the allocator: texts a tenant would pick to make a small text hold much
//! (lists of one-entry maps, maps nested in maps, long strings, wide maps), decoded within
//! generated budgets from a kilobyte to some megabytes, under an allocator that tracks the most
//! the process held at once. Whatever the text, the decoding never held more than its budget
//! and half again (a vector's growth holds its old slots beside its new ones for a moment), and
//! the scratch serde_json keeps for a string with escapes: the string unescaped, at most the
//! text, in a vector grown by doubling, so up to twice that, the old beside the new while it
//! grows (found by a generated string of 4,097 escapes: 98 KB held at once for 49 KB of text,
//! past an allowance of the text alone). That scratch is the deserializer's, whoever decodes:
//! bounded by the text, which the page bound and etcd bound.
//!
//! Its own test binary, one test: the tracking allocator is the binary's global allocator.

#![allow(clippy::unwrap_used)] // a test: generated JSON that does not parse may fail loudly

use kube_retention_runtime::held::{Budget, DEPTH, Within, held_bytes};
use peak_alloc::PeakAlloc;
use proptest::prelude::*;
use serde::de::DeserializeSeed;

/// The system allocator, keeping count of what is held now and the most held since reset (a
/// reallocation holds both its old and its new block).
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// The most `decode` held at once beyond what was held before it, and what it returned.
fn peak_of<T>(decode: impl FnOnce() -> T) -> (usize, T) {
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    let made = decode();
    (ALLOCATOR.peak_usage() - before, made)
}

/// Text of a shape that holds much for its size, of about `items` items.
fn dense(shape: u8, items: usize) -> String {
    match shape % 5 {
        0 => format!("[{}]", vec![r#"{"a":1}"#; items].join(",")),
        1 => format!(
            "{}1{}",
            r#"{"a":"#.repeat(items.min(120)),
            "}".repeat(items.min(120))
        ),
        2 => format!(r#"{{"s":"{}"}}"#, "x\\n".repeat(items * 4)),
        3 => format!(
            "{{{}}}",
            (0..items)
                .map(|index| format!(r#""k{index}":{{"name":"E{index}","value":""}}"#))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => format!(
            r#"{{"spec":{{"env":[{}]}}}}"#,
            (0..items)
                .map(|index| format!(r#"{{"name":"E{index}"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_decoding_never_holds_more_than_its_budget(
        shape in any::<u8>(),
        items in 1usize..40_000,
        budget in 1024usize..8 * 1024 * 1024,
    ) {
        let text = dense(shape, items);
        let limit = Budget::new(budget);
        let (peak, value) = peak_of(|| {
            Within::new(&limit).deserialize(&mut serde_json::Deserializer::from_str(&text)).unwrap()
        });
        prop_assert!(
            peak <= budget + budget / 2 + 3 * text.len(),
            "held {peak} at once within a budget of {budget} ({} bytes of text, shape {})",
            text.len(),
            shape % 5
        );
        // Kept whole exactly when the whole fits, and is no deeper than is decoded.
        let whole: serde_json::Value = serde_json::from_str(&text).unwrap();
        let deeper = shape % 5 == 1 && items.min(120) > DEPTH;
        prop_assert_eq!(limit.exceeded(), held_bytes(&whole) > budget || deeper);
        if !limit.exceeded() {
            prop_assert_eq!(value, whole);
        }
    }
}
