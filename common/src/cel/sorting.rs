//! A list `sort()` may be given: its items all of one type, and no double among them NaN.
//!
//! kube-cel's `sort` compares items with CEL's ordering and takes two items it cannot compare
//! as equal. On a list that mixes types (a string against a number) or holds NaN that is no
//! order at all, and Rust's sort, finding so, panics; where numbers of different types meet it
//! is lossy (an int is compared as a double, so two distinct ints can both equal one double).
//! The panic would be contained, but the evaluation would fail with an interpreter's message;
//! refused here, before the call runs, it fails with one that says what to fix.

use kube_cel::cel::common::types::{CelDouble, CelList};
use kube_cel::cel::common::value::Val;

/// Whether `sort()` may run on `value`; if not, why, for the evaluation's error.
pub(super) fn sortable(value: &dyn Val) -> Result<(), String> {
    let Some(list) = value.downcast_ref::<CelList>() else {
        return Ok(());
    };
    let Some(first) = list.inner().first() else {
        return Ok(());
    };
    let kind = first.get_type().name();
    for item in list.inner() {
        if item.get_type().name() != kind {
            return Err(format!(
                "sort() needs items of one type, and this list holds a {} among {}s: convert \
                 them first (string(), int())",
                item.get_type().name(),
                kind
            ));
        }
        if item
            .downcast_ref::<CelDouble>()
            .is_some_and(|double| double.inner().is_nan())
        {
            return Err("sort() cannot order NaN, and this list holds one".to_owned());
        }
    }
    Ok(())
}
