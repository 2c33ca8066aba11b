//! The run-time side of [`super::cost`]: a meter per thread that the charges written into an
//! expression add to, armed for one evaluation at a time with a cost limit and a time limit.
//! Past either, every further charge fails, so the evaluation unwinds within a few steps; its
//! result is then discarded whatever it was, because CEL's `||` and `&&` absorb an error on one
//! side when the other decides.
//!
//! A costed call is charged before it runs: each of its operands, as it is evaluated, is
//! recorded in the call's frame and the call's rule is applied to what is recorded so far
//! ([`super::cost::rules`]); what that comes to beyond what the call was charged already is
//! charged at once. So by the time the function runs, its whole cost is charged, and a call
//! that would pass the limit fails without running. An operand that is never evaluated (an
//! error on the way, absorbed by `||`) leaves its frame behind, and the same site's next call
//! starts it afresh: frames are kept by site, one per call in the expression.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cpu_time::ThreadTime;
use kube_cel::cel::common::ast::{Expr, LiteralValue};
use kube_cel::cel::extractors::Arguments;
use kube_cel::cel::{ExecutionError, FunctionContext, ResolveResult, Value};

use super::cost::rules::{self, Extent, Rule};
use super::cost::{CHARGE, COST_LIMIT, OPERAND, SELECT, Site, chain};
use super::measure::{copied_along, copied_whole, copying, extent};
use super::{sorting, speed};

/// How long one evaluation may run, in the evaluating thread's CPU time. The cost limit is what
/// bounds an evaluation; this is the second guard, for work the cost model misjudges. At 40 to
/// 90 ns a unit (`make bench-cel`, docs/benchmarks/cel.md) [`COST_LIMIT`] takes 40 to 90 ms in a
/// release build, so an expression near its cost limit may be stopped by this one first.
///
/// CPU time, not the wall clock's: the controller evaluates at the lowest priority, and on a
/// loaded machine an evaluation waits many times longer than it runs; stopped by the wall clock
/// it would fail for what other processes did. Reading a thread's CPU clock is a system call
/// (about 2 µs), so it is read every 16 charges or 60 µs of work charged; in between, the time
/// is foretold from the last reading and the work charged since, each step's time foretold
/// before it runs (a unit at [`NANOS_PER_UNIT`], a copy by the kinds it copies) and scaled to
/// this machine ([`speed`]) — so an evaluation ends within a few calls of this: [`TIME_BOUND`]
/// is what the fuzz campaign holds every evaluation to.
pub const TIME_LIMIT: Duration = Duration::from_millis(40);

/// The most one evaluation takes, in CPU time on a release build: [`TIME_LIMIT`] and the one
/// call running when it passed (`common/tests/cel_fuzz.rs` asserts it for every case).
pub const TIME_BOUND: Duration = Duration::from_millis(100);

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
    Cost {
        limit: u64,
    },
    Time {
        limit: Duration,
    },
    /// A bound the operating system holds the evaluating process to, whatever the meter
    /// foretold: the process was ended, and the expression is not evaluated again.
    Process(Overrun),
}

/// Which of the evaluating process's own bounds an evaluation went past (the controller's
/// sandbox: its limits are the evaluator crate's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// Its address space (`RLIMIT_AS`), in bytes.
    Memory { limit: u64 },
    /// Its CPU time for one step (`RLIMIT_CPU`).
    Cpu { limit: Duration },
    /// Its stack, in bytes.
    Stack { limit: u64 },
    /// It ended otherwise, by this signal (or exit status).
    Ended { code: i32 },
}

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |bytes: u64| bytes / (1024 * 1024);
        match self {
            Overrun::Memory { limit } => {
                write!(
                    f,
                    "went past the evaluator's memory limit of {} MiB",
                    mib(*limit)
                )
            }
            Overrun::Cpu { limit } => {
                write!(
                    f,
                    "went past the evaluator's CPU time limit of {limit:?} a step"
                )
            }
            Overrun::Stack { limit } => {
                write!(f, "went past the evaluator's stack of {} MiB", mib(*limit))
            }
            Overrun::Ended { code } => write!(f, "ended the evaluator ({code})"),
        }
    }
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
            Exceeded::Process(overrun) => write!(
                f,
                "{overrun} on this object, so its process was ended: the expression is not \
                 evaluated again until its policy or Cleaner changes; simplify it"
            ),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Meter {
    spent: u64,
    budget: Budget,
    /// The thread's CPU clock when the evaluation began.
    began: Option<ThreadTime>,
    /// CPU time taken at the last reading, and the work charged since (in nanoseconds on the
    /// figures' machine) and how many charges.
    read: Duration,
    nanos_since: u64,
    charges_since: u32,
    /// This machine's time for a thousand of the figures' ([`speed::slowness`]).
    slowness: u64,
    exceeded: Option<Exceeded>,
}

impl Meter {
    const IDLE: Meter = Meter {
        spent: 0,
        budget: Budget {
            cost: u64::MAX,
            time: Duration::MAX,
        },
        began: None,
        read: Duration::ZERO,
        nanos_since: 0,
        charges_since: 0,
        slowness: 1_000,
        exceeded: None,
    };

    /// The CPU time the evaluation will have taken once the work charged so far, `nanos` of
    /// it charged now and not begun, is done: the clock read when enough was charged since its
    /// last reading, and the work charged since then foretold, scaled to this machine.
    fn foretold(&mut self, nanos: u64) -> Option<Duration> {
        let began = self.began?;
        if self.charges_since >= READ_EVERY_CHARGES || self.nanos_since >= READ_EVERY_NANOS {
            self.read = began.elapsed();
            self.charges_since = 0;
            self.nanos_since = 0;
        }
        self.nanos_since = self.nanos_since.saturating_add(nanos);
        self.charges_since = self.charges_since.saturating_add(1);
        let ahead = self.nanos_since.saturating_mul(self.slowness) / 1_000;
        Some(self.read.saturating_add(Duration::from_nanos(ahead)))
    }
}

/// The thread's CPU clock is read once this many charges were made since the last reading...
const READ_EVERY_CHARGES: u32 = 16;
/// ...or once this much work was, in nanoseconds on the figures' machine.
const READ_EVERY_NANOS: u64 = 60_000;

/// One costed call's operands so far, and what it was charged for them.
#[derive(Debug, Clone, Default)]
struct Frame {
    seen: Vec<bool>,
    operands: Vec<Extent>,
    charged: u64,
}

/// The sites of the expression being evaluated, and a frame for each.
#[derive(Debug, Default)]
struct Calls {
    sites: Arc<[Site]>,
    frames: Vec<Frame>,
}

thread_local! {
    static METER: Cell<Meter> = const { Cell::new(Meter::IDLE) };
    static CALLS: RefCell<Calls> = RefCell::new(Calls::default());
}

/// Runs `evaluate` with the meter armed for `budget` and the calls at `sites`; answers what it
/// gave, what it spent, and the limit it went past if it did.
pub(super) fn metered<T>(
    budget: Budget,
    sites: &Arc<[Site]>,
    evaluate: impl FnOnce() -> T,
) -> (T, u64, Option<Exceeded>) {
    let armed = Meter {
        budget,
        slowness: speed::slowness(),
        began: Some(ThreadTime::now()),
        ..Meter::IDLE
    };
    let calls = Calls {
        sites: sites.clone(),
        frames: vec![Frame::default(); sites.len()],
    };
    let outer = METER.with(|meter| meter.replace(armed));
    let outer_calls = CALLS.with(|cell| cell.replace(calls));
    let result = evaluate();
    CALLS.with(|cell| cell.replace(outer_calls));
    let spent = METER.with(|meter| meter.replace(outer));
    (result, spent.spent, spent.exceeded)
}

/// What a unit is taken to last when a charge foretells the work it pays for: the slow end
/// of what `make bench-cel` measures on a release build. Copies are foretold by what they
/// copy instead ([`super::measure::COPY_NANOS`]).
pub const NANOS_PER_UNIT: u64 = 60;

/// The time of `units` of work other than copies, on the figures' machine.
fn nanos_of(units: u64) -> u64 {
    units.saturating_mul(NANOS_PER_UNIT)
}

/// Adds `units` to the meter, and fails past the cost limit, or where the work they pay for,
/// `nanos` long on the figures' machine, would end past the time limit (foretold:
/// [`Meter::foretold`]). A charge comes before its work, never after a long stretch of it.
fn spend(units: u64, nanos: u64) -> Result<(), ExecutionError> {
    METER.with(|cell| {
        let mut meter = cell.get();
        meter.spent = meter.spent.saturating_add(units);
        let foretold = meter.foretold(nanos);
        if meter.exceeded.is_none() && meter.spent > meter.budget.cost {
            meter.exceeded = Some(Exceeded::Cost {
                limit: meter.budget.cost,
            });
        }
        if meter.exceeded.is_none() && foretold.is_some_and(|end| end > meter.budget.time) {
            meter.exceeded = Some(Exceeded::Time {
                limit: meter.budget.time,
            });
        }
        cell.set(meter);
        match meter.exceeded {
            Some(exceeded) => Err(ExecutionError::function_error(CHARGE, exceeded)),
            None => Ok(()),
        }
    })
}

fn number(args: &[Value], index: usize) -> u64 {
    match args.get(index) {
        Some(Value::Int(number)) => u64::try_from(*number).unwrap_or(0),
        _ => 0,
    }
}

/// The function [`CHARGE`]: `(value, units)` charges `units` and gives `value` back.
pub(super) fn charge(Arguments(args): Arguments) -> Result<Value, ExecutionError> {
    let units = number(&args, 1);
    spend(units, nanos_of(units))?;
    Ok(args.first().cloned().unwrap_or(Value::Null))
}

/// The function [`OPERAND`]: `(value, site, index)` records `value` as operand `index` of the
/// call at `site`, charges what the call costs beyond what it was charged, and gives `value`
/// back. The value is measured where the interpreter holds it, before the copy that passing it
/// on makes: a call past the limit fails without copying anything.
pub(super) fn operand(ftx: &FunctionContext) -> ResolveResult {
    let literal = |index: usize| match ftx.args.get(index).map(|arg| &arg.expr) {
        Some(Expr::Literal(LiteralValue::Int(number))) => usize::try_from(*number.inner()).ok(),
        _ => None,
    };
    let (Some(expr), Some(site), Some(index)) = (ftx.args.first(), literal(1), literal(2)) else {
        return Err(ExecutionError::function_error(OPERAND, "malformed"));
    };
    let value = Value::resolve_val(expr, ftx.ptx)?;
    let copy = copying(value.as_ref());
    let extent = extent(value.as_ref(), copy);
    let units = CALLS.with(|cell| {
        let mut calls = cell.borrow_mut();
        let Calls { sites, frames } = &mut *calls;
        let (Some(site), Some(frame)) = (sites.get(site), frames.get_mut(site)) else {
            return Err(ExecutionError::function_error(OPERAND, "no such call"));
        };
        if frame.seen.len() != site.arity || frame.seen.get(index).copied().unwrap_or(true) {
            // A new call at this site (or the first).
            *frame = Frame {
                seen: vec![false; site.arity],
                operands: vec![Extent::default(); site.arity],
                charged: 0,
            };
        }
        let (Some(seen), Some(slot)) = (frame.seen.get_mut(index), frame.operands.get_mut(index))
        else {
            return Err(ExecutionError::function_error(OPERAND, "no such operand"));
        };
        if site.rule == Rule::Sort && index == 0 {
            sorting::sortable(value.as_ref())
                .map_err(|reason| ExecutionError::function_error("sort", reason))?;
        }
        *seen = true;
        *slot = extent;
        let cost = rules::call_units(site.rule, &frame.operands);
        let units = cost.saturating_sub(frame.charged);
        frame.charged = frame.charged.max(cost);
        Ok(units)
    })?;
    // The operand's copies are charged in `units` at a unit's time; they take what they copy.
    let copies_beyond = copy
        .nanos
        .saturating_sub(nanos_of(copy.units))
        .saturating_mul(rules::COPIES);
    spend(units, nanos_of(units).saturating_add(copies_beyond))?;
    value.as_ref().try_into()
}

/// The function [`SELECT`]: `(chain)`, a chain of selects from a variable, left unevaluated;
/// measures, where the variable holds it, what each select of the chain will copy, charges
/// that, and gives true. The chain then runs (`SELECT(chain) ? chain : null`) only once it is
/// paid for. A chain that will fail (a missing field, a variable that is not there) is charged
/// what it copies before it fails and left to fail with its own error.
pub(super) fn select(ftx: &FunctionContext) -> ResolveResult {
    let copy = match ftx.args.first().map(|arg| &arg.expr) {
        Some(Expr::Select(select)) => {
            let Some((root, fields)) = chain(select) else {
                return Err(ExecutionError::function_error(SELECT, "malformed"));
            };
            ftx.ptx
                .get_variable(root)
                .map(|value| copied_along(value.as_ref(), &fields))
                .unwrap_or_default()
        }
        // A variable read whole: its copy, beyond what is free, like a select's.
        Some(Expr::Ident(name)) => ftx
            .ptx
            .get_variable(name)
            .map(|value| copied_whole(value.as_ref()))
            .unwrap_or_default(),
        _ => return Err(ExecutionError::function_error(SELECT, "malformed")),
    };
    spend(copy.units, copy.nanos)?;
    Ok(Value::Bool(true))
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
