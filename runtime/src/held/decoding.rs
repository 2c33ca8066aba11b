//! JSON text read as what it would hold decoded ([`super::held_bytes`] of its tree), before or
//! while it is decoded: [`Weighed`] reads text and keeps nothing but the weight, so a page can be
//! refused before anything in it is decoded; [`Within`] decodes a value charging a [`Budget`] as
//! it goes, each string, slot and node before it is kept, and past the budget keeps nothing
//! more: the rest of the text is read past, and the value comes back as `null` with the budget
//! [`exceeded`](Budget::exceeded). So what a decoding holds is bounded by the budget whatever
//! the text is, not by an estimate made of it beforehand.
//!
//! Both charge what [`super::held_bytes`] charges for the tree they read, entry by entry: a map's
//! nodes and an array's slots grow with their entries, so each entry is charged what it adds to
//! them (the weight of a container of `n + 1` entries less that of `n`). A key given twice is
//! charged twice, though the tree keeps it once: never less than what is held.
//!
//! Neither goes deeper than [`DEPTH`]: serde_json ends a decoding 128 deep with an error, which
//! failed a whole page of a list, and so the list of a kind, for every namespace, whenever one
//! object of it was nested deeper (a custom resource's free-form field may be: the API server
//! accepts 10,000). Past it a value is read past (serde_json reads past a value without
//! recursing): [`Within`] keeps nothing of the value it was decoding and says its budget was
//! exceeded, and [`Weighed`] weighs the part read past as nothing, since nothing of it is kept.
//! Hand-written: serde_json's own `Value` decoder has no bound.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{allocation, array_bytes, map_bytes};

/// The deepest a value is decoded or weighed, below where it starts: well within serde_json's
/// 128, with what a list or a watch event wraps an object's data in.
pub const DEPTH: usize = 64;

/// The weight of a value as decoded into a tree: what [`super::held_bytes`] of that tree is,
/// read from its text without keeping any of it (what lies deeper than [`DEPTH`], nothing).
/// `Weighed::default()` reads a value from its top.
#[derive(Clone, Copy, Debug, Default)]
pub struct Weighed {
    /// How far below where it started this value lies.
    depth: usize,
}

impl Weighed {
    /// What weighs the values inside this one: the next depth, or none past [`DEPTH`].
    fn inner(self) -> Option<Self> {
        (self.depth < DEPTH).then_some(Self {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Weighed {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Weighed {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_i64<E>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_u64<E>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_f64<E>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_none<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E>(self, text: &str) -> Result<usize, E> {
        Ok(allocation(text.len()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<usize, A::Error> {
        let Some(inner) = self.inner() else {
            while items.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(0);
        };
        let (mut count, mut bytes) = (0usize, 0usize);
        while let Some(item) = items.next_element_seed(inner)? {
            count += 1;
            bytes = bytes.saturating_add(item);
        }
        Ok(bytes.saturating_add(array_bytes(count)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<usize, A::Error> {
        let Some(inner) = self.inner() else {
            while fields.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(0);
        };
        let (mut count, mut bytes) = (0usize, 0usize);
        while let Some(key) = fields.next_key_seed(inner)? {
            let value = fields.next_value_seed(inner)?;
            count += 1;
            bytes = bytes.saturating_add(key).saturating_add(value);
        }
        Ok(bytes.saturating_add(map_bytes(count)))
    }
}

/// What a decoding may still hold ([`Within`]); once exceeded, it stays so.
#[derive(Debug)]
pub struct Budget {
    left: Cell<usize>,
    exceeded: Cell<bool>,
}

impl Budget {
    /// A budget of `bytes`, as [`super::held_bytes`] weighs them.
    pub fn new(bytes: usize) -> Self {
        Self {
            left: Cell::new(bytes),
            exceeded: Cell::new(false),
        }
    }

    /// Whether something decoded within it was more than it had left.
    pub fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    /// Charges an entry keyed `key` added to a map of `entries` (its value charged as it was
    /// decoded): false, and exceeded from then on, if it does not fit.
    pub fn entry(&self, key: &str, entries: usize) -> bool {
        let grown = map_bytes(entries + 1) - map_bytes(entries);
        self.charge(allocation(key.len()).saturating_add(grown))
    }

    /// Keeps nothing more: what was being decoded lies deeper than [`DEPTH`].
    fn refuse(&self) {
        self.exceeded.set(true);
    }

    /// Takes `bytes` from what is left: false, and exceeded from then on, if less is left.
    fn charge(&self, bytes: usize) -> bool {
        if self.exceeded.get() {
            return false;
        }
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                true
            }
            None => {
                self.exceeded.set(true);
                false
            }
        }
    }
}

/// A value decoded into a tree within a [`Budget`]: `null`, with the budget exceeded, where the
/// tree would hold more than it had left, or lies deeper than [`DEPTH`] (see the module).
#[derive(Clone, Copy, Debug)]
pub struct Within<'a> {
    budget: &'a Budget,
    /// How far below where it started this value lies.
    depth: usize,
}

impl<'a> Within<'a> {
    /// A value decoded from its top within `budget`.
    pub fn new(budget: &'a Budget) -> Self {
        Self { budget, depth: 0 }
    }

    /// What decodes the values inside this one: the next depth, or none past [`DEPTH`], where
    /// the budget is refused.
    fn inner(self) -> Option<Self> {
        if self.depth >= DEPTH {
            self.budget.refuse();
            return None;
        }
        Some(Self {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Within<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Within<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_str<E>(self, text: &str) -> Result<Value, E> {
        Ok(match self.budget.charge(allocation(text.len())) {
            true => Value::String(text.to_owned()),
            false => Value::Null,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut kept = Vec::new();
        if let Some(inner) = self.inner() {
            while let Some(item) = items.next_element_seed(inner)? {
                let grown = array_bytes(kept.len() + 1) - array_bytes(kept.len());
                if !self.budget.charge(grown) {
                    break;
                }
                kept.push(item);
            }
        }
        if self.budget.exceeded() {
            while items.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        Ok(Value::Array(kept))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        if let Some(inner) = self.inner() {
            while let Some(key) = fields.next_key_seed(Key(self.budget))? {
                let value = fields.next_value_seed(inner)?;
                let grown = map_bytes(kept.len() + 1) - map_bytes(kept.len());
                let Some(key) = key.filter(|_| self.budget.charge(grown)) else {
                    break;
                };
                kept.insert(key, value);
            }
        }
        if self.budget.exceeded() {
            while fields.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        Ok(Value::Object(kept))
    }
}

/// A map's key within the budget: `None`, the budget exceeded, where it had too little left.
struct Key<'a>(&'a Budget);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<String>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a map's key")
    }

    fn visit_str<E>(self, text: &str) -> Result<Option<String>, E> {
        Ok(self
            .0
            .charge(allocation(text.len()))
            .then(|| text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::held::held_bytes;

    /// JSON of every shape: scalars, strings with escapes, arrays and maps of any size, nested.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|number| Value::Number(number.into())),
            "[a-zé\"\\\\\n ]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 400, 24, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..24).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,6}", inner, 0..24)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    fn weighed(text: &str) -> usize {
        Weighed::default()
            .deserialize(&mut serde_json::Deserializer::from_str(text))
            .unwrap()
    }

    fn within(text: &str, bytes: usize) -> (Value, bool) {
        let budget = Budget::new(bytes);
        let value = Within::new(&budget)
            .deserialize(&mut serde_json::Deserializer::from_str(text))
            .unwrap();
        (value, budget.exceeded())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Weighed from its text, a tree weighs what it holds decoded; decoded within a budget
        /// of at least that, it is the tree serde_json decodes; within any less, nothing.
        #[test]
        fn text_weighs_what_its_tree_holds_and_decodes_only_within_it(
            value in json(),
            short in 1usize..10_000,
        ) {
            let text = value.to_string();
            let held = held_bytes(&value);
            prop_assert_eq!(weighed(&text), held);
            prop_assert_eq!(within(&text, held), (value.clone(), false));
            prop_assert_eq!(within(&text, usize::MAX), (value, false));
            if held > 0 {
                let (kept, exceeded) = within(&text, held.saturating_sub(short));
                prop_assert!(exceeded);
                prop_assert_eq!(kept, Value::Null);
            }
        }
    }

    #[test]
    fn a_key_given_twice_is_charged_twice() {
        let text = r#"{"a":"x","a":"y"}"#;
        let once: Value = serde_json::from_str(text).unwrap();
        assert!(weighed(text) > held_bytes(&once));
        let (value, exceeded) = within(text, held_bytes(&once));
        assert!(exceeded);
        assert_eq!(value, Value::Null);
    }

    /// `depth` maps nested, each in the next, around a string.
    fn nested(depth: usize) -> String {
        format!("{}\"x\"{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
    }

    #[test]
    fn a_value_deeper_than_the_bound_is_read_past_not_an_error() {
        // Within the bound: decoded whole, weighed as held.
        let shallow = nested(DEPTH);
        let value: Value = serde_json::from_str(&shallow).unwrap();
        assert_eq!(within(&shallow, usize::MAX), (value.clone(), false));
        assert_eq!(weighed(&shallow), held_bytes(&value));
        // Deeper (serde_json alone gives up at 128): nothing kept, no error, wrapped or not.
        for depth in [DEPTH + 1, 200, 100_000] {
            let deep = nested(depth);
            assert_eq!(serde_json::from_str::<Value>(&deep).is_err(), depth > 128);
            assert_eq!(within(&deep, usize::MAX), (Value::Null, true), "{depth}");
            let wrapped = format!(r#"{{"kind":"List","items":[{deep},{deep}]}}"#);
            assert!(weighed(&wrapped) > 0, "{depth}");
        }
    }

    #[test]
    fn text_that_is_not_json_is_an_error_not_a_weight() {
        for text in ["{", r#"{"a":}"#, "[1,]", "\"unterminated"] {
            let mut read = serde_json::Deserializer::from_str(text);
            assert!(Weighed::default().deserialize(&mut read).is_err(), "{text}");
            let mut read = serde_json::Deserializer::from_str(text);
            assert!(
                Within::new(&Budget::new(1 << 20))
                    .deserialize(&mut read)
                    .is_err(),
                "{text}"
            );
        }
    }
}
