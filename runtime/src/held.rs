//! What a parsed JSON tree holds on the heap: the weight every bound on decoded objects charges
//! (the evaluator's backlog and the way to it, the Cleaners' book), and never less than the
//! tree holds.
//!
//! Its text is no measure: serde_json keeps a map in a `BTreeMap`, whose every node takes room
//! for eleven entries at once, so `{"name":"E1"}` (13 bytes) holds some 650, and an object made
//! of small maps holds fifty times its text. The weight was once its text and 32 bytes a node,
//! which such objects defeated tenfold: Jobs of 20,000 `env` entries each took the controller
//! from 77 to 300 MiB past bounds of 8 MiB (docs/explanation/tenancy.md). So each value is
//! charged what its container allocates for it, as the standard library lays it out:
//!
//! - a string, its bytes (parsed strings are allocated to their length);
//! - an array, the slots its vector may have grown to (doubling from 4: at most twice its
//!   items, 32 bytes each);
//! - a map, the B-tree's nodes: leaves of 11 entries with at least 5 each once split, and the
//!   internal nodes over them with at least 6 children each, each node its whole size;
//!
//! and every allocation a quarter more and 32 bytes, for what the allocator keeps beside it
//! (glibc's header and 16-byte rounding, musl's size classes), or, past 128 KiB, where both map
//! it on its own, a page and 32 bytes. `runtime/tests/held_bytes.rs`
//! parses generated JSON under a counting allocator and holds the weight to at least what was
//! allocated, and to at most four times it.
//!
//! The same weight is read from text before or while it is decoded (`held/decoding.rs`): a
//! page weighed before its objects are, an object decoded within a budget it cannot overrun;
//! and an object's metadata weighed from its text (`held/metadata.rs`) before it is decoded.

mod decoding;
mod metadata;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, ObjectMeta};
use serde_json::Value;

pub use decoding::{Budget, DEPTH, Weighed, Within};
pub use metadata::{FieldWeigher, Texts, field_weigher};

/// A value as its container holds it (`serde_json::Value`'s size).
const VALUE: usize = 32;
/// A map's entries in one B-tree node, and the fewest a node holds once split.
const NODE_ENTRIES: usize = 11;
const SPLIT_ENTRIES: usize = 5;
/// The fewest children of an internal node once split.
const SPLIT_CHILDREN: usize = 6;
/// A `String` as its container holds it (a node's key, a vector's item).
const STRING: usize = 24;
/// An array's first allocation, in items.
const FIRST_SLOTS: usize = 4;

/// At least what parsing `value` allocated, allocator's overhead included; its own slot (the
/// 32 bytes of the `Value`) is its container's to count. Walked with a stack of its own (an
/// object's nesting is the API server's to bound, not ours).
pub fn held_bytes(value: &Value) -> usize {
    let mut bytes = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        let held = match value {
            Value::String(text) => allocation(text.len()),
            Value::Array(items) => {
                pending.extend(items);
                array_bytes(items.len())
            }
            Value::Object(fields) => {
                let keys: usize = fields.keys().map(|key| allocation(key.len())).sum();
                pending.extend(fields.values());
                map_bytes(fields.len()).saturating_add(keys)
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        };
        bytes = bytes.saturating_add(held);
    }
    bytes
}

/// At least what `object` holds, as decoded from a watch or a list: the object itself, its
/// metadata's texts, maps and lists, and its data. Walks it, allocating nothing.
pub fn object_held_bytes(object: &DynamicObject) -> usize {
    let types = object.types.as_ref().map_or(0, |types| {
        allocation(types.api_version.len()).saturating_add(allocation(types.kind.len()))
    });
    std::mem::size_of::<DynamicObject>()
        .saturating_add(types)
        .saturating_add(metadata_held_bytes(&object.metadata))
        .saturating_add(held_bytes(&object.data))
}

/// At least what `metadata` holds beyond its own struct.
pub fn metadata_held_bytes(metadata: &ObjectMeta) -> usize {
    let text = |text: &Option<String>| text.as_deref().map_or(0, |text| allocation(text.len()));
    let texts = [
        &metadata.name,
        &metadata.namespace,
        &metadata.generate_name,
        &metadata.uid,
        &metadata.resource_version,
        &metadata.self_link,
    ]
    .into_iter()
    .map(text)
    .fold(0usize, usize::saturating_add);
    let finalizers = metadata.finalizers.as_deref().map_or(0, |finalizers| {
        finalizers
            .iter()
            .map(|finalizer| allocation(finalizer.len()))
            .fold(slots_bytes(finalizers.len(), STRING), usize::saturating_add)
    });
    let owners = metadata.owner_references.as_deref().map_or(0, |owners| {
        owners
            .iter()
            .map(|owner| {
                [&owner.api_version, &owner.kind, &owner.name, &owner.uid]
                    .into_iter()
                    .map(|text| allocation(text.len()))
                    .fold(0usize, usize::saturating_add)
            })
            .fold(
                slots_bytes(owners.len(), std::mem::size_of::<OwnerReference>()),
                usize::saturating_add,
            )
    });
    // Lean decoding leaves them out; decoded any other way, they are weighed as their tree.
    let managed = metadata.managed_fields.as_ref().map_or(0, |managed| {
        serde_json::to_value(managed).map_or(0, |value| held_bytes(&value))
    });
    texts
        .saturating_add(string_map_bytes(metadata.labels.as_ref()))
        .saturating_add(string_map_bytes(metadata.annotations.as_ref()))
        .saturating_add(finalizers)
        .saturating_add(owners)
        .saturating_add(managed)
}

/// A map of texts (labels, annotations): its nodes, keys and values.
fn string_map_bytes(map: Option<&BTreeMap<String, String>>) -> usize {
    let Some(map) = map else {
        return 0;
    };
    map.iter()
        .map(|(key, value)| allocation(key.len()).saturating_add(allocation(value.len())))
        .fold(nodes_bytes(map.len(), STRING), usize::saturating_add)
}

/// An allocation of `size` bytes with what the allocator keeps beside it; none for nothing (a
/// text's weight).
pub fn allocation(size: usize) -> usize {
    match size {
        0 => 0,
        // Mapped on its own (past glibc's and musl's thresholds): rounded to a page.
        size if size > MAPPED => size.saturating_add(PAGE).saturating_add(32),
        size => size.saturating_add(size / 4).saturating_add(32),
    }
}

/// Past this, an allocation is mapped on its own, and wastes at most a page.
const MAPPED: usize = 128 * 1024;
const PAGE: usize = 4096;

/// The slots of an array of `items` of `Value`s.
fn array_bytes(items: usize) -> usize {
    slots_bytes(items, VALUE)
}

/// The slots of a vector of `items` of `size` bytes, grown by doubling from four.
pub fn slots_bytes(items: usize, size: usize) -> usize {
    match items {
        0 => 0,
        items => allocation(
            items
                .max(FIRST_SLOTS)
                .next_power_of_two()
                .saturating_mul(size),
        ),
    }
}

/// The nodes of a map of `Value`s of `entries`.
pub fn map_bytes(entries: usize) -> usize {
    nodes_bytes(entries, VALUE)
}

/// The nodes of a `BTreeMap<String, _>` of `entries` whose values are `value` bytes.
fn nodes_bytes(entries: usize, value: usize) -> usize {
    let leaf = NODE_ENTRIES * (STRING + value) + 16;
    let internal = leaf + (NODE_ENTRIES + 1) * 8;
    if entries == 0 {
        return 0;
    }
    if entries <= NODE_ENTRIES {
        return allocation(leaf);
    }
    let mut nodes = entries.div_ceil(SPLIT_ENTRIES);
    let mut bytes = nodes.saturating_mul(allocation(leaf));
    while nodes > 1 {
        nodes = nodes.div_ceil(SPLIT_CHILDREN);
        bytes = bytes.saturating_add(nodes.saturating_mul(allocation(internal)));
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_of_one_entry_weighs_its_node_not_its_text() {
        let value: Value = serde_json::from_str(r#"{"name":"E1"}"#).unwrap();
        assert_eq!(
            held_bytes(&value),
            map_bytes(1) + allocation(4) + allocation(2)
        );
        assert!(held_bytes(&value) > 50 * 13);
    }

    #[test]
    fn scalars_and_empty_containers_hold_nothing_beyond_their_slot() {
        for text in ["null", "true", "12", "1.5", r#""""#, "[]", "{}"] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(held_bytes(&value), 0, "{text}");
        }
    }

    #[test]
    fn the_node_sizes_are_the_standard_librarys() {
        assert_eq!(std::mem::size_of::<Value>(), VALUE);
        assert_eq!(std::mem::size_of::<String>(), STRING);
    }
}
