//! The run-time side of [`super::cost`]: a meter per thread that the charges written into an
//! expression add to, armed for one evaluation at a time with a cost limit and a time limit.
//! Past either, every further charge fails, so the evaluation unwinds within a few steps; its
//! result is then discarded whatever it was, because CEL's `||` and `&&` absorb an error on one
//! side when the other decides.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use kube_cel::cel::extractors::Arguments;
use kube_cel::cel::{ExecutionError, Value};

use super::cost::{CHARGE, COST_LIMIT, How};

/// How long one evaluation may run. The cost limit is what bounds an evaluation; this is the
/// second guard, for work the cost model misjudges. At 40 to 90 ns a unit (`make bench-cel`,
/// docs/benchmarks.md) [`COST_LIMIT`] takes 40 to 90 ms in a release build.
pub const TIME_LIMIT: Duration = Duration::from_millis(100);

/// The clock is read once every this many charges.
const CLOCK_EVERY: u32 = 64;

/// What one evaluation may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub cost: u64,
    pub time: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            cost: COST_LIMIT,
            time: TIME_LIMIT,
        }
    }
}

/// Which limit an evaluation went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Cost { limit: u64 },
    Time { limit: Duration },
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Cost { limit } => write!(
                f,
                "exceeded the cost limit of {} on this object: simplify the expression, or \
                 loop over fewer items",
                thousands(*limit)
            ),
            Exceeded::Time { limit } => write!(
                f,
                "ran longer than the limit of {limit:?} on this object: simplify the expression"
            ),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Meter {
    spent: u64,
    budget: Budget,
    deadline: Option<Instant>,
    charges: u32,
    exceeded: Option<Exceeded>,
}

impl Meter {
    const IDLE: Meter = Meter {
        spent: 0,
        budget: Budget {
            cost: u64::MAX,
            time: Duration::MAX,
        },
        deadline: None,
        charges: 0,
        exceeded: None,
    };
}

thread_local! {
    static METER: Cell<Meter> = const { Cell::new(Meter::IDLE) };
}

/// Runs `evaluate` with the meter armed for `budget`; answers what it gave, what it spent, and
/// the limit it went past if it did.
pub(super) fn metered<T>(
    budget: Budget,
    evaluate: impl FnOnce() -> T,
) -> (T, u64, Option<Exceeded>) {
    let armed = Meter {
        budget,
        deadline: Instant::now().checked_add(budget.time),
        ..Meter::IDLE
    };
    let outer = METER.with(|meter| meter.replace(armed));
    let result = evaluate();
    let spent = METER.with(|meter| meter.replace(outer));
    (result, spent.spent, spent.exceeded)
}

/// The function [`CHARGE`]: `(value, units, how)` charges `units` and `value`'s size as `how`
/// says, and gives `value` back.
pub(super) fn charge(Arguments(args): Arguments) -> Result<Value, ExecutionError> {
    let value = args.first().cloned().unwrap_or(Value::Null);
    let number = |index: usize| match args.get(index) {
        Some(Value::Int(number)) => u64::try_from(*number).unwrap_or(0),
        _ => 0,
    };
    let how = How::from_units(i64::try_from(number(2)).unwrap_or(0));
    let (bytes, items) = match &value {
        Value::String(text) => (text.len(), 0),
        Value::Bytes(bytes) => (bytes.len(), 0),
        Value::List(list) => (0, list.len()),
        Value::Map(map) => (0, map.map.len()),
        _ => (0, 0),
    };
    let size = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let units = number(1).saturating_add(how.units(size(bytes), size(items)));
    METER.with(|cell| {
        let mut meter = cell.get();
        meter.spent = meter.spent.saturating_add(units);
        meter.charges = meter.charges.wrapping_add(1);
        if meter.exceeded.is_none() && meter.spent > meter.budget.cost {
            meter.exceeded = Some(Exceeded::Cost {
                limit: meter.budget.cost,
            });
        }
        if meter.exceeded.is_none()
            && meter.charges.is_multiple_of(CLOCK_EVERY)
            && meter
                .deadline
                .is_some_and(|deadline| Instant::now() > deadline)
        {
            meter.exceeded = Some(Exceeded::Time {
                limit: meter.budget.time,
            });
        }
        cell.set(meter);
        match meter.exceeded {
            Some(exceeded) => Err(ExecutionError::function_error(CHARGE, exceeded)),
            None => Ok(value),
        }
    })
}

/// `1234567` as `1,234,567`.
pub fn thousands(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
