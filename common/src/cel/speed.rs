//! How much slower than the machine the meter's figures come from ([`NANOS_PER_UNIT`],
//! [`COPY_NANOS`]) this one runs: measured once a process, at its first evaluation, by copying
//! a reference value as a select does (walked, then copied) and comparing the time with
//! [`REFERENCE_NANOS`], what the same copy took there. The meter foretells every step's time
//! scaled by it, so on a machine three times slower a step that would end past the time limit
//! is stopped before it starts, as it is on the machine the figures come from — not let run
//! to three times the limit.
//!
//! Never below 1: a faster machine keeps the figures, whose margin then only grows. The
//! median of seven copies, in the thread's CPU time: neither other processes nor a slow
//! first allocation move it much.
//!
//! [`NANOS_PER_UNIT`]: super::meter::NANOS_PER_UNIT
//! [`COPY_NANOS`]: super::measure::COPY_NANOS

use std::sync::OnceLock;
use std::time::Duration;

use cpu_time::ThreadTime;
use kube_cel::cel::common::value::Val;
use serde_json::json;

use super::conversion::to_cel;
use super::measure::copying;

/// What copying [`reference()`] took on the machine the figures come from, walk included, in
/// a release build (`make bench-cel` prints it; docs/benchmarks/cel.md).
pub const REFERENCE_NANOS: u64 = 400_000;

/// How many copies the measure takes the median of.
const RUNS: usize = 7;

/// A value of every kind a copy meets, about 6,000 of them: items as a Job's containers and
/// conditions hold them.
pub fn reference() -> Option<Box<dyn Val>> {
    let items: Vec<_> = (0..500)
        .map(|index| {
            json!({"name": format!("item-{index:04}"), "ready": index % 2 == 0,
                   "count": index, "tags": ["a", "bb", "ccc"]})
        })
        .collect();
    value_of(&json!({"items": items}))
}

/// `json` as the meter meets it in an object (converted as an object is).
pub fn value_of(json: &serde_json::Value) -> Option<Box<dyn Val>> {
    Box::<dyn Val>::try_from(to_cel(json).ok()?).ok()
}

/// The time the meter foretells for copying `value`, in nanoseconds on the figures' machine
/// (before [`slowness`] scales it).
pub fn foretold_copy(value: &dyn Val) -> u64 {
    copying(value).nanos
}

/// How long copying `value` takes here, as a select makes it: walked, then copied.
pub fn copy_time(value: &dyn Val) -> Duration {
    let started = ThreadTime::now();
    let walked = copying(value);
    let copy = value.clone_as_boxed();
    let took = started.elapsed();
    drop((walked, copy));
    took
}

/// This machine's time for what takes a thousand on the figures' machine (at least 1,000).
pub fn slowness() -> u64 {
    static SLOWNESS: OnceLock<u64> = OnceLock::new();
    *SLOWNESS.get_or_init(measure)
}

fn measure() -> u64 {
    let Some(reference) = reference() else {
        return 1_000;
    };
    let mut times: Vec<Duration> = (0..RUNS).map(|_| copy_time(reference.as_ref())).collect();
    times.sort();
    let median = times.get(RUNS / 2).copied().unwrap_or_default();
    let nanos = u64::try_from(median.as_nanos()).unwrap_or(u64::MAX);
    (nanos.saturating_mul(1_000) / REFERENCE_NANOS).max(1_000)
}
