//! What a value costs the interpreter, measured where it holds the value, without copying it:
//! what the cost rules read of an operand ([`extent`]), what copying it costs ([`copying`]),
//! and what a chain of selects copies ([`copied_along`]).
//!
//! A copy is counted in the model's units (a unit a value) and foretold in time by the kind of
//! each value copied ([`COPY_NANOS`]): copies of the same units differ in time by four times
//! and more (a map's entry against an integer), and a copy is one step of the interpreter that
//! the meter cannot stop once begun, so its time must be known before it starts.

use kube_cel::cel::common::types::{
    CelBytes, CelInt, CelList, CelMap, CelMapKey, CelString, CelUInt,
};
use kube_cel::cel::common::value::Val;

use super::cost::rules::{self, Extent};
use super::cost::{COST_LIMIT, FREE_COPY};

/// What copying a value of each kind takes, in nanoseconds on the machine the meter's figures
/// were measured on: the copy, and the walk that measured it first, as a select makes them
/// (`make bench-cel`'s copy table, docs/benchmarks/cel.md, gives what each kind measured; each
/// figure here is rounded up from it). The meter scales them to the machine it runs on
/// ([`super::speed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyNanos {
    /// A number, a boolean, a null, a timestamp.
    pub scalar: u64,
    /// A string or bytes, its text aside.
    pub string: u64,
    /// A list, its items aside.
    pub list: u64,
    /// A map, its entries aside.
    pub map: u64,
    /// A map's entry with its key, the value aside.
    pub entry: u64,
    /// Bytes of text copied a nanosecond.
    pub bytes_per_nano: u64,
}

/// The figures: see [`CopyNanos`].
pub const COPY_NANOS: CopyNanos = CopyNanos {
    scalar: 100,
    string: 160,
    list: 340,
    map: 340,
    entry: 340,
    bytes_per_nano: 4,
};

/// What copying a value costs: in the model's units ([`Extent::deep`]), and in time on the
/// machine [`COPY_NANOS`] were measured on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Copying {
    pub units: u64,
    pub nanos: u64,
}

impl Copying {
    fn add(self, other: Copying) -> Copying {
        Copying {
            units: self.units.saturating_add(other.units),
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

/// What the selects `fields` copy, taken one after another from `value`, beyond
/// [`FREE_COPY`] each: each gives a copy of what it selects, a presence test nothing.
pub(super) fn copied_along(value: &dyn Val, fields: &[(&str, bool)]) -> Copying {
    let Some(((field, test), rest)) = fields.split_first() else {
        return Copying::default();
    };
    if *test {
        return Copying::default();
    }
    let key = CelString::from(*field);
    let Some(Ok(selected)) = value.as_indexer().map(|indexer| indexer.get(&key)) else {
        return Copying::default();
    };
    copied_whole(selected.as_ref()).add(copied_along(selected.as_ref(), rest))
}

/// What copying `value` whole costs, where that is beyond [`FREE_COPY`] (a variable read whole:
/// [`super::cost`]'s guard of it).
pub(super) fn copied_whole(value: &dyn Val) -> Copying {
    let copy = copying_up_to(value, COST_LIMIT.saturating_add(1));
    if copy.units > FREE_COPY {
        copy
    } else {
        Copying::default()
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The text of a string or bytes.
fn text_of(value: &dyn Val) -> Option<u64> {
    value
        .downcast_ref::<CelString>()
        .map(|text| count(text.inner().len()))
        .or_else(|| {
            value
                .downcast_ref::<CelBytes>()
                .map(|bytes| count(bytes.inner().len()))
        })
}

fn key_text(key: &CelMapKey) -> u64 {
    match key {
        CelMapKey::String(text) => count(text.inner().len()),
        _ => 0,
    }
}

/// What the rules read of a value: a list's or map's items are looked at once, as copying
/// them would.
pub(super) fn extent(value: &dyn Val, copying: Copying) -> Extent {
    let mut extent = Extent {
        deep: copying.units,
        ..Extent::default()
    };
    if let Some(text) = text_of(value) {
        extent.text = text;
        extent.least = text;
    } else if let Some(list) = value.downcast_ref::<CelList>() {
        extent.items = count(list.inner().len());
        for item in list.inner() {
            let string = text_of(item.as_ref());
            extent.strings = extent.strings.saturating_add(u64::from(string.is_some()));
            let text = string.unwrap_or(0);
            extent.inner = extent.inner.saturating_add(text);
            extent.widest = extent.widest.max(text);
        }
    } else if let Some(map) = value.downcast_ref::<CelMap>() {
        extent.items = count(map.inner().len());
        for (key, item) in map.inner() {
            let text = key_text(key).saturating_add(text_of(item.as_ref()).unwrap_or(0));
            extent.inner = extent.inner.saturating_add(text);
            extent.widest = extent.widest.max(text);
        }
    } else if let Some(number) = value.downcast_ref::<CelInt>() {
        extent.number = u64::try_from(*number.inner()).unwrap_or(0);
    } else if let Some(number) = value.downcast_ref::<CelUInt>() {
        extent.number = *number.inner();
    }
    extent
}

/// What copying `value` costs, walked with a stack of its own.
pub(super) fn copying(value: &dyn Val) -> Copying {
    copying_up_to(value, u64::MAX)
}

/// [`copying`], the walk stopped once its units pass `most`: enough to tell a copy past any
/// limit.
pub(super) fn copying_up_to(value: &dyn Val, most: u64) -> Copying {
    let nanos = COPY_NANOS;
    let mut copy = Copying::default();
    let mut pending = vec![value];
    while let Some(value) = pending.pop()
        && copy.units <= most
    {
        let (units, took) = if let Some(text) = text_of(value) {
            let units = 1u64.saturating_add(rules::compared(text));
            (
                units,
                nanos.string.saturating_add(text / nanos.bytes_per_nano),
            )
        } else if let Some(list) = value.downcast_ref::<CelList>() {
            pending.extend(list.inner().iter().map(AsRef::as_ref));
            (1, nanos.list)
        } else if let Some(map) = value.downcast_ref::<CelMap>() {
            let mut units = 1u64;
            let mut took = nanos.map;
            for (key, item) in map.inner() {
                let text = key_text(key);
                units = units.saturating_add(rules::compared(text));
                took = took
                    .saturating_add(nanos.entry)
                    .saturating_add(text / nanos.bytes_per_nano);
                pending.push(item.as_ref());
            }
            (units, took)
        } else {
            (1, nanos.scalar)
        };
        copy = copy.add(Copying { units, nanos: took });
    }
    copy
}
