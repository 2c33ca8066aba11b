//! What a value costs the interpreter, measured where it holds the value, without copying it:
//! what the cost rules read of an operand ([`extent`]), what copying it costs ([`deep`]), and
//! what a chain of selects copies ([`copied_along`]).

use kube_cel::cel::common::types::{
    CelBytes, CelInt, CelList, CelMap, CelMapKey, CelString, CelUInt,
};
use kube_cel::cel::common::value::Val;

use super::cost::rules::{self, Extent};
use super::cost::{COST_LIMIT, FREE_COPY};

/// What the selects `fields` copy, taken one after another from `value`, beyond
/// [`FREE_COPY`] each: each gives a copy of what it selects, a presence test nothing.
pub(super) fn copied_along(value: &dyn Val, fields: &[(&str, bool)]) -> u64 {
    let Some(((field, test), rest)) = fields.split_first() else {
        return 0;
    };
    if *test {
        return 0;
    }
    let key = CelString::from(*field);
    let Some(Ok(selected)) = value.as_indexer().map(|indexer| indexer.get(&key)) else {
        return 0;
    };
    let copy = deep_up_to(selected.as_ref(), COST_LIMIT.saturating_add(1));
    let charged = if copy > FREE_COPY { copy } else { 0 };
    charged.saturating_add(copied_along(selected.as_ref(), rest))
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
pub(super) fn extent(value: &dyn Val) -> Extent {
    let mut extent = Extent {
        deep: deep(value),
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

/// What copying `value` costs ([`Extent::deep`]), walked with a stack of its own.
pub(super) fn deep(value: &dyn Val) -> u64 {
    deep_up_to(value, u64::MAX)
}

/// [`deep`], the walk stopped once it passes `most`: enough to tell a copy past any limit.
fn deep_up_to(value: &dyn Val, most: u64) -> u64 {
    let mut units = 0u64;
    let mut pending = vec![value];
    while let Some(value) = pending.pop()
        && units <= most
    {
        units = units.saturating_add(1);
        if let Some(text) = text_of(value) {
            units = units.saturating_add(rules::compared(text));
        } else if let Some(list) = value.downcast_ref::<CelList>() {
            pending.extend(list.inner().iter().map(AsRef::as_ref));
        } else if let Some(map) = value.downcast_ref::<CelMap>() {
            for (key, item) in map.inner() {
                units = units.saturating_add(rules::compared(key_text(key)));
                pending.push(item.as_ref());
            }
        }
    }
    units
}
