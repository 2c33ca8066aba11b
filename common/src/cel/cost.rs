//! The cost of an expression, known before any object is seen, and the meter that counts it
//! while one runs. One walk over the parsed expression does both: it writes the charges into a
//! copy of the expression (calls to [`CHARGE`], which the interpreter runs like any function)
//! and adds up the most those charges can come to. The estimate and the run-time count are
//! therefore the same sum, the estimate with every size at its bound; so an expression whose
//! estimate is within [`COST_LIMIT`] stays within it on any object within the bounds, and one
//! that is not is refused at admission. The CEL interpreter (the `cel` crate) has no cost hooks
//! of its own: this is why the charges are written into the expression.
//!
//! The model follows Kubernetes' (cel-go's cost estimator, `PerCallLimit`), in its units: one
//! per node evaluated, a string operation a tenth of a unit per byte, a list or map operation a
//! unit per item, and a loop the cost of its body once per item. A call is charged by its rule
//! ([`rules`]: what it reads and what it makes, from its operands' sizes) before it runs, so
//! no single call can outrun the limit, and memory is bounded with time. Where it differs:
//! - Sizes. Kubernetes reads `maxItems` and `maxLength` from the schema, and for a field with
//!   none assumes the largest request. kube-retention judges any kind, mostly without a schema
//!   at hand, and with that assumption every loop over an object's list would be refused. It
//!   knows the limits of `metadata` (a name is at most 253 bytes, a label value 63, ...) and
//!   assumes that any other list or map holds at most [`ASSUMED_ITEMS`] items and at most
//!   [`ASSUMED_BYTES`] bytes of text in all, nested items included, and any other string at
//!   most [`ASSUMED_BYTES`] bytes. These are assumptions: an object beyond them is still
//!   bounded, at run time, by the same limit.
//! - Comparisons (`==`, `<`, ...) are charged up to the shorter operand: a comparison stops at
//!   the first difference, and a length that differs is found at once.
//! - The function rules themselves: [`rules`] says where they differ and why.
//! - The run-time count charges what ran, so a loop that stops early (`exists` on a match) is
//!   charged for the items it saw.

use kube_cel::cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

/// The most an expression may cost, estimated at admission and counted at run time:
/// Kubernetes' per-call limit for CEL.
pub const COST_LIMIT: u64 = 1_000_000;

/// A list read from an object without a known bound is assumed to hold at most this many items.
pub const ASSUMED_ITEMS: u64 = 256;

/// A string read from an object without a known bound is assumed to be at most this many bytes.
pub const ASSUMED_BYTES: u64 = 4_096;

/// The function the walk writes into an expression: `CHARGE(value, units)` charges `units` and
/// gives `value` back (the nodes of the expression, or of a loop's body once per item). The `@`
/// keeps it out of reach of what users write: it is not an identifier.
pub const CHARGE: &str = "@retention.charge";

/// The function the walk wraps each operand of a costed call in: `OPERAND(value, site, index)`
/// records `value`'s size as operand `index` of the call at `site` and charges what the call
/// costs with the operands recorded so far ([`rules`]), before the call runs.
pub const OPERAND: &str = "@retention.operand";

/// The function the walk guards a chain of selects from a variable with: `SELECT(chain)`
/// measures the copies the chain's selects make, charges those beyond [`FREE_COPY`], and gives
/// true, so that `SELECT(chain) ? chain : null` runs the chain only once they are paid for
/// (the walk's `select_chain`).
pub const SELECT: &str = "@retention.select";

/// A select's copy this large or smaller is not charged: no value within the bounds' sizes
/// ([`ASSUMED_ITEMS`], [`ASSUMED_BYTES`]: about 700 units to copy whole) comes near it, so
/// estimates need not count it, and between two readings of the clock (every 16 charges, a
/// guard among them) such copies add at most 16 × 2,048 units, about 2 ms.
pub const FREE_COPY: u64 = 2_048;

/// CEL's conditional operator, by its name in the syntax tree.
const CONDITIONAL: &str = "_?_:_";

/// Functions that take no time with the size of their arguments.
const CONSTANT: [&str; 3] = ["size", "type", "has"];

/// Operators (`_==_`, `!_`) and the parser's own (`@in`, `@not_strictly_false`).
fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.ends_with('_') || name.starts_with('@')
}

/// A number read from the object, or computed, is not known at admission: as large as this.
pub const UNKNOWN_NUMBER: u64 = 1 << 32;

/// A costed call in an expression: its rule and how many operands it has (the target first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub rule: Rule,
    pub arity: usize,
}

/// An upper bound on a value's size: bytes as text, items as a collection, and the bound on
/// each item (unknown where `None`).
#[derive(Debug, Clone, PartialEq)]
struct Size {
    bytes: u64,
    items: u64,
    item: Option<Box<Size>>,
    /// A whole number's value: a literal's, or [`UNKNOWN_NUMBER`].
    number: u64,
}

impl Size {
    const SCALAR: Size = Size {
        bytes: 0,
        items: 0,
        item: None,
        number: UNKNOWN_NUMBER,
    };

    fn unknown() -> Self {
        Size {
            bytes: ASSUMED_BYTES,
            items: ASSUMED_ITEMS,
            ..Size::SCALAR
        }
    }

    /// What the rules read of a bound.
    fn extent(&self) -> Extent {
        let item = self.item();
        // Items of unknown size hold at most the assumed bytes of text in all.
        let inner = match &self.item {
            Some(item) => self.items.saturating_mul(item.bytes),
            None => ASSUMED_BYTES,
        };
        Extent {
            text: self.bytes,
            items: self.items,
            inner,
            widest: item.bytes,
            least: 0,
            number: self.number,
            deep: self.deep(),
            // Not known before the object: as charged where none is a string (`join`).
            strings: 0,
        }
    }

    /// What copying a value within this bound costs ([`Extent::deep`]): items of unknown size
    /// hold at most the assumed bytes of text and the assumed items in all, nested included.
    fn deep(&self) -> u64 {
        let own = 1u64.saturating_add(rules::compared(self.bytes));
        let items = match &self.item {
            Some(item) => self.items.saturating_mul(item.deep()),
            None => match self.items {
                0 => 0,
                _ => ASSUMED_ITEMS.saturating_add(rules::compared(ASSUMED_BYTES)),
            },
        };
        own.saturating_add(items)
    }

    fn text(bytes: u64) -> Self {
        Size {
            bytes,
            ..Size::SCALAR
        }
    }

    fn item(&self) -> Size {
        self.item.as_deref().cloned().unwrap_or_else(Size::unknown)
    }

    /// The larger of two bounds, part by part.
    fn max(self, other: Size) -> Size {
        let item = match (self.item, other.item) {
            (Some(a), Some(b)) => Some(Box::new(a.max(*b))),
            _ => None,
        };
        Size {
            bytes: self.bytes.max(other.bytes),
            items: self.items.max(other.items),
            item,
            number: self.number.max(other.number),
        }
    }
}

/// What the walk knows of a value: its size, and where it comes from in `object`.
#[derive(Debug, Clone)]
struct Known {
    size: Size,
    /// The path below a declared variable, while it is one (`object`, `metadata`, `name`).
    path: Option<Vec<String>>,
}

impl Known {
    fn sized(size: Size) -> Self {
        Known { size, path: None }
    }
}

/// An expression with its charges written in, the most they can come to, and its costed calls.
pub(super) struct Metered {
    pub expr: IdedExpr,
    pub estimate: u64,
    pub sites: Vec<Site>,
}

/// Writes the charges into `expr` and estimates their sum.
pub(super) fn meter(expr: &IdedExpr) -> Metered {
    let mut walk = Walk::default();
    let mut unit = Unit::default();
    let (metered, _) = walk.node(expr, &mut unit);
    let nodes = unit.nodes;
    Metered {
        expr: charge(metered, nodes),
        estimate: unit.cost.saturating_add(nodes),
        sites: walk.sites,
    }
}

/// The nodes evaluated together once (the whole expression, or a loop's body each time round)
/// and the cost of what they contain beyond themselves (charged values, inner loops).
#[derive(Default)]
struct Unit {
    nodes: u64,
    cost: u64,
}

#[derive(Default)]
struct Walk {
    /// Loop variables in scope, with what is known of them.
    bound: Vec<(String, Known)>,
    /// The costed calls met so far; a call's place here is its site.
    sites: Vec<Site>,
}

fn int(number: u64) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Int(
            i64::try_from(number).unwrap_or(i64::MAX).into(),
        )),
    }
}

fn internal(function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args,
        }),
    }
}

fn charge(value: IdedExpr, units: u64) -> IdedExpr {
    internal(CHARGE, vec![value, int(units)])
}

fn operand(value: IdedExpr, site: usize, index: usize) -> IdedExpr {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    internal(OPERAND, vec![value, int(count(site)), int(count(index))])
}

pub mod offered;
pub mod rules;
mod sizes;
mod walk;

pub use rules::{Extent, Rule};
pub(in crate::cel) use walk::chain;
