//! Decoding only what admission reads, within a budget. An AdmissionReview carries whole
//! objects (a Job's pod template, its `managedFields`, an UPDATE's object and oldObject both),
//! and serde's `Value` spends 32 bytes on every number and more on every map entry: decoded
//! whole, a 4 MB review took the webhook from 12 to 217 MiB. Admission reads a few fields of
//! an object: its metadata, the retention fields its kind keeps ([`kube_retention_common::kinds`]),
//! the status its finish rule reads ([`kube_retention_common::progress`]); all of a policy or a
//! Cleaner. A [`Keep`] says which, and [`decode`] builds a `Value` of those parts alone, reading
//! past the rest without keeping it (serde's `IgnoredAny`, which allocates nothing).
//!
//! What it does keep is charged to a [`Budget`] as it is built, before it is allocated: each
//! value [`NODE`] bytes (a `Value`, and as much again for the room its list keeps for it),
//! each map entry [`ENTRY`] more (its share of the map's B-tree nodes), each list and map
//! that holds anything the first allocation it makes ([`FIRST_LIST`], [`FIRST_MAP`]), each text
//! its bytes as the allocator rounds them ([`heap`]). A review whose kept parts would pass the budget is not
//! decoded further: the caller answers it without judging it ([`Exceeded`]). The charge is an
//! upper bound on what the decoded parts allocate, whatever their shape, by the layouts of
//! `Value`, `Vec` and `BTreeMap` (serde_json keeps maps in B-trees here); the port's campaign
//! (`tests/testsuite/campaign.rs`) holds the webhook to its memory limit with the densest
//! bodies.
//!
//! The parts are kept exactly as they were, so the model's verdict on them is its verdict on the
//! whole object, and a JSON patch computed between two of them applies to the whole object: a
//! map keeps only the keys its plan lists, and every other part of the object the mutation
//! writes to is kept whole. Within `metadata` a null field is left out, as kube's `ObjectMeta`
//! (the type the whole object was read into before) leaves it out.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// What one `Value` is charged besides its text: itself, and the room its list keeps for it
/// (a list's capacity doubles, so up to twice what it holds).
pub const NODE: usize = 2 * std::mem::size_of::<Value>();
/// What one map entry is charged besides its key's text and its value: its share of the
/// B-tree's nodes (a node of eleven entries, at least half full once split, and the parent's
/// edges to it).
pub const ENTRY: usize = 128;
/// A map's first node, allocated whole with its first entry (eleven keys and values).
pub const FIRST_MAP: usize =
    11 * (std::mem::size_of::<String>() + std::mem::size_of::<Value>()) + 32;
/// A list's first allocation, room for four values.
pub const FIRST_LIST: usize = 4 * std::mem::size_of::<Value>();

/// What a text of `len` bytes costs on the heap: nothing when empty, else its bytes rounded
/// up as an allocator rounds them, and as much as its smallest class again.
pub fn heap(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.next_multiple_of(16) + 16
    }
}

/// What of a JSON value is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// The whole value.
    All,
    /// Nothing: the key is left out.
    Nothing,
    /// Of an object, the keys `fields` lists, each by its own plan, and the others by `rest`;
    /// of a list, each element by this plan (unless `quoted`); any other value whole.
    Fields {
        fields: BTreeMap<String, Keep>,
        /// Keys beginning with one of these are kept whole (`retention.dev/` annotations).
        prefixes: Vec<String>,
        rest: Box<Keep>,
        /// A value the model may quote in a denial when it is not an object: a list is then
        /// kept whole, not element by element.
        quoted: bool,
        /// Whether a field whose value is null is left out (as `ObjectMeta` leaves it out).
        drop_nulls: bool,
    },
}

impl Keep {
    /// An object's `fields`, nothing else.
    pub fn only(fields: impl IntoIterator<Item = (String, Keep)>) -> Self {
        Self::Fields {
            fields: fields.into_iter().collect(),
            prefixes: Vec::new(),
            rest: Box::new(Self::Nothing),
            quoted: false,
            drop_nulls: false,
        }
    }

    /// Every field of an object but `left_out`.
    pub fn all_but(left_out: &[&str]) -> Self {
        Self::Fields {
            fields: left_out
                .iter()
                .map(|key| ((*key).to_owned(), Self::Nothing))
                .collect(),
            prefixes: Vec::new(),
            rest: Box::new(Self::All),
            quoted: false,
            drop_nulls: false,
        }
    }

    /// This plan, keeping a value that is not an object whole (see [`Keep::Fields`]).
    pub fn quoted(mut self) -> Self {
        if let Self::Fields { quoted, .. } = &mut self {
            *quoted = true;
        }
        self
    }

    /// This plan, leaving out fields whose value is null.
    pub fn without_nulls(mut self) -> Self {
        if let Self::Fields { drop_nulls, .. } = &mut self {
            *drop_nulls = true;
        }
        self
    }

    /// This plan, keeping whole every key that begins with `prefix`.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        if let Self::Fields { prefixes, .. } = &mut self
            && !prefixes.iter().any(|known| known == prefix)
        {
            prefixes.push(prefix.to_owned());
        }
        self
    }

    /// Keeps the field `key` (which may hold dots: a label's or an annotation's) whole.
    pub fn add_key(&mut self, key: &str) {
        if let Self::Fields { fields, .. } = self {
            fields.insert(key.to_owned(), Self::All);
        }
    }

    /// Adds `plan` at the dotted `path` below this one, merging with what is there: `All`
    /// wins over any narrower plan.
    pub fn add(&mut self, path: &str, plan: Keep) {
        let (head, rest) = match path.split_once('.') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        let Self::Fields { fields, .. } = self else {
            return;
        };
        let slot = fields
            .entry(head.to_owned())
            .or_insert_with(|| Keep::only([]));
        match rest {
            Some(rest) => slot.add(rest, plan),
            None => slot.merge(plan),
        }
    }

    fn merge(&mut self, plan: Keep) {
        match (&mut *self, plan) {
            (Self::All, _) => {}
            (_, Self::All) => *self = Self::All,
            (_, Self::Nothing) => {}
            (Self::Nothing, plan) => *self = plan,
            (
                Self::Fields {
                    fields,
                    prefixes,
                    quoted,
                    drop_nulls,
                    ..
                },
                Self::Fields {
                    fields: more,
                    prefixes: more_prefixes,
                    quoted: more_quoted,
                    drop_nulls: more_drop,
                    ..
                },
            ) => {
                *quoted |= more_quoted;
                *drop_nulls |= more_drop;
                for prefix in more_prefixes {
                    if !prefixes.contains(&prefix) {
                        prefixes.push(prefix);
                    }
                }
                for (key, plan) in more {
                    match fields.get_mut(&key) {
                        Some(slot) => slot.merge(plan),
                        None => {
                            fields.insert(key, plan);
                        }
                    }
                }
            }
        }
    }
}

/// Why a decode stopped short of its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// The review's own limit.
    #[error("what admission reads of it takes more than {limit} bytes once decoded")]
    Review { limit: usize },
    /// The memory all admissions share.
    #[error(
        "the webhook's memory for admissions ({capacity} bytes) is taken by the admissions in flight"
    )]
    Shared { capacity: usize },
}

/// Where the charges go besides the review's own limit: the memory every admission shares.
pub trait Account {
    /// Takes `bytes` more, or says why not.
    fn take(&mut self, bytes: usize) -> Result<(), Exceeded>;
}

/// No memory shared: the review's own limit alone (tests, tools).
impl Account for () {
    fn take(&mut self, _bytes: usize) -> Result<(), Exceeded> {
        Ok(())
    }
}

/// What one review may still keep. Charges are taken from the shared [`Account`] in steps of
/// 64 KiB, so most charges touch nothing shared.
pub struct Budget<'a> {
    limit: usize,
    used: usize,
    prepaid: usize,
    account: &'a mut dyn Account,
    /// The first charge refused, if any.
    pub exceeded: Option<Exceeded>,
}

impl<'a> Budget<'a> {
    const STEP: usize = 64 * 1024;

    pub fn new(limit: usize, account: &'a mut dyn Account) -> Self {
        Self {
            limit,
            used: 0,
            prepaid: 0,
            account,
            exceeded: None,
        }
    }

    /// What has been charged.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Charges `bytes`, or refuses them (and remembers why).
    pub fn charge(&mut self, bytes: usize) -> Result<(), Exceeded> {
        let refused = if self.used.saturating_add(bytes) > self.limit {
            Some(Exceeded::Review { limit: self.limit })
        } else if bytes > self.prepaid {
            let step = bytes.max(Self::STEP).min(self.limit - self.used);
            match self.account.take(step) {
                Ok(()) => {
                    self.prepaid += step;
                    None
                }
                Err(exceeded) => Some(exceeded),
            }
        } else {
            None
        };
        if let Some(exceeded) = refused {
            self.exceeded.get_or_insert(exceeded);
            return Err(exceeded);
        }
        self.prepaid -= bytes;
        self.used += bytes;
        Ok(())
    }

    fn charge_for<E: serde::de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        self.charge(bytes).map_err(E::custom)
    }
}

/// Decodes `text` (one JSON value) keeping what `plan` says, charging `budget`. The error is
/// serde's; after one, `budget.exceeded` says whether the budget stopped it.
pub fn decode(
    text: &str,
    plan: &Keep,
    budget: &mut Budget<'_>,
) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Lean { plan, budget }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Decodes one value by its plan.
struct Lean<'p, 'b, 'a> {
    plan: &'p Keep,
    budget: &'b mut Budget<'a>,
}

impl<'de> DeserializeSeed<'de> for Lean<'_, '_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Lean<'_, '_, '_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Value, E> {
        self.budget.charge_for(NODE)?;
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Value, E> {
        self.budget.charge_for(NODE)?;
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Value, E> {
        self.budget.charge_for(NODE)?;
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Value, E> {
        self.budget.charge_for(NODE)?;
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Value, E> {
        self.budget.charge_for(NODE + heap(value.len()))?;
        Ok(Value::String(value.to_owned()))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.budget.charge_for(NODE)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.charge_for(NODE)?;
        let element = match self.plan {
            Keep::Fields { quoted: true, .. } => &Keep::All,
            plan => plan,
        };
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Lean {
            plan: element,
            budget: &mut *self.budget,
        })? {
            if items.is_empty() {
                self.budget.charge_for(FIRST_LIST)?;
            }
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.charge_for(NODE)?;
        let mut kept = Map::new();
        while let Some(key) = map.next_key_seed(KeyPlan { plan: self.plan })? {
            let (key, plan, drop_nulls) = match key {
                Some(found) => found,
                None => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let first = if kept.is_empty() { FIRST_MAP } else { 0 };
            self.budget.charge_for(first + ENTRY + heap(key.len()))?;
            let value = map.next_value_seed(Lean {
                plan,
                budget: &mut *self.budget,
            })?;
            if drop_nulls && value.is_null() {
                kept.remove(&key);
                continue;
            }
            kept.insert(key, value);
        }
        Ok(Value::Object(kept))
    }
}

/// A key read against a plan: the key and its value's plan where it is kept (and whether a
/// null value is left out), `None` where it is not — then its text is never copied.
struct KeyPlan<'p> {
    plan: &'p Keep,
}

impl<'p> KeyPlan<'p> {
    fn of(&self, key: &str) -> Option<(String, &'p Keep, bool)> {
        let (plan, drop_nulls) = match self.plan {
            Keep::All => (&Keep::All, false),
            Keep::Nothing => return None,
            Keep::Fields {
                fields,
                prefixes,
                rest,
                drop_nulls,
                ..
            } => {
                let plan = match fields.get(key) {
                    Some(plan) => plan,
                    None if prefixes.iter().any(|prefix| key.starts_with(prefix)) => &Keep::All,
                    None => rest,
                };
                (plan, *drop_nulls)
            }
        };
        (*plan != Keep::Nothing).then(|| (key.to_owned(), plan, drop_nulls))
    }
}

impl<'de, 'p> DeserializeSeed<'de> for KeyPlan<'p> {
    type Value = Option<(String, &'p Keep, bool)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'p> Visitor<'de> for KeyPlan<'p> {
    type Value = Option<(String, &'p Keep, bool)>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.of(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lean(value: &Value, plan: &Keep) -> Value {
        let text = value.to_string();
        decode(&text, plan, &mut Budget::new(usize::MAX, &mut ())).unwrap()
    }

    #[test]
    fn keeps_what_the_plan_lists_and_reads_past_the_rest() {
        let mut plan = Keep::only([]);
        plan.add(
            "metadata.annotations",
            Keep::only([]).with_prefix("retention.dev/"),
        );
        plan.add("status.conditions.type", Keep::All);
        let object = json!({"metadata": {"annotations": {"a": "1", "retention.dev/ttl": "1h"},
                                         "managedFields": [1, 2]},
                            "spec": {"template": {"x": [1, 2, 3]}},
                            "status": {"conditions": [{"type": "Complete", "reason": "r"}, 7]}});
        assert_eq!(
            lean(&object, &plan),
            json!({"metadata": {"annotations": {"retention.dev/ttl": "1h"}},
                   "status": {"conditions": [{"type": "Complete"}, 7]}})
        );
    }

    #[test]
    fn a_quoted_value_that_is_not_an_object_is_kept_whole() {
        let mut plan = Keep::only([]);
        plan.add("spec.retention", Keep::only([]).quoted());
        let object = json!({"spec": {"retention": [{"a": 1}, 2]}});
        assert_eq!(lean(&object, &plan), object);
    }

    #[test]
    fn nulls_are_left_out_where_asked() {
        let plan = Keep::all_but(&["managedFields"]).without_nulls();
        let object = json!({"labels": null, "name": "n", "managedFields": []});
        assert_eq!(lean(&object, &plan), json!({"name": "n"}));
    }

    #[test]
    fn all_wins_over_a_narrower_plan() {
        let mut plan = Keep::only([]);
        plan.add("spec.retention.ttl", Keep::All);
        plan.add("spec", Keep::All);
        plan.add("spec.retention.limit", Keep::All);
        assert_eq!(plan, Keep::only([("spec".to_owned(), Keep::All)]));
    }

    #[test]
    fn a_budget_stops_the_decode_and_says_which() {
        let text = json!({"a": [1, 2, 3, 4, 5, 6, 7, 8]}).to_string();
        let mut unshared = ();
        let mut budget = Budget::new(4 * NODE, &mut unshared);
        assert!(decode(&text, &Keep::All, &mut budget).is_err());
        assert_eq!(budget.exceeded, Some(Exceeded::Review { limit: 4 * NODE }));
        let mut unshared = ();
        let mut budget = Budget::new(4 * NODE, &mut unshared);
        let skipped = decode(&text, &Keep::only([]), &mut budget).unwrap();
        assert_eq!(skipped, json!({}));
        assert_eq!(budget.used(), NODE, "what is read past costs nothing");
    }

    struct Refusing;

    impl Account for Refusing {
        fn take(&mut self, _bytes: usize) -> Result<(), Exceeded> {
            Err(Exceeded::Shared { capacity: 1 })
        }
    }

    #[test]
    fn the_shared_account_is_asked_in_steps() {
        let mut refusing = Refusing;
        let mut budget = Budget::new(usize::MAX, &mut refusing);
        assert!(decode("[1]", &Keep::All, &mut budget).is_err());
        assert_eq!(budget.exceeded, Some(Exceeded::Shared { capacity: 1 }));
    }
}
