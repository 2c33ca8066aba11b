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
//! unit per item, and a loop the cost of its body once per item. Where it differs:
//! - Sizes. Kubernetes reads `maxItems` and `maxLength` from the schema, and for a field with
//!   none assumes the largest request. kube-retention judges any kind, mostly without a schema
//!   at hand, and with that assumption every loop over an object's list would be refused. It
//!   knows the limits of `metadata` (a name is at most 253 bytes, a label value 63, ...) and
//!   assumes that any other list holds at most [`ASSUMED_ITEMS`] items and any other string
//!   at most [`ASSUMED_BYTES`] bytes. These are assumptions: an object beyond them is still
//!   bounded, at run time, by the same limit.
//! - Equality (`==`, `!=`) is one unit whatever the sizes: it stops at the first difference,
//!   and a length that differs is found at once.
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

/// The function the walk writes into an expression: `CHARGE(value, units, how)` charges
/// `units`, plus the size of `value` as `how` says ([`How`]), and gives `value` back. The `@`
/// keeps it out of reach of what users write: it is not an identifier.
pub const CHARGE: &str = "@retention.charge";

/// How a charged value's size counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum How {
    /// Not at all: a fixed number of units.
    Fixed = 0,
    /// As a string or bytes: a tenth of a unit per byte (a list passed here costs nothing: the
    /// function it goes to fails at once).
    Text = 1,
    /// As a string, bytes, list or map, whichever it is: a tenth of a unit per byte or a unit
    /// per item (searched).
    Any = 2,
    /// As a copy (concatenation): a tenth of a unit per byte, a unit per item.
    Copy = 3,
}

impl How {
    pub(super) fn from_units(code: i64) -> Self {
        match code {
            1 => How::Text,
            2 => How::Any,
            3 => How::Copy,
            _ => How::Fixed,
        }
    }

    /// What `bytes` of text or `items` of a collection cost.
    pub(super) fn units(self, bytes: u64, items: u64) -> u64 {
        let text = bytes.div_ceil(10);
        match self {
            How::Fixed => 0,
            How::Text => text,
            How::Any => text.max(items),
            How::Copy => text.max(items),
        }
    }
}

/// An upper bound on a value's size: bytes as text, items as a collection, and the bound on
/// each item (unknown where `None`).
#[derive(Debug, Clone, PartialEq)]
struct Size {
    bytes: u64,
    items: u64,
    item: Option<Box<Size>>,
}

impl Size {
    const SCALAR: Size = Size {
        bytes: 0,
        items: 0,
        item: None,
    };

    fn unknown() -> Self {
        Size {
            bytes: ASSUMED_BYTES,
            items: ASSUMED_ITEMS,
            item: None,
        }
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

/// An expression with its charges written in, and the most they can come to.
pub(super) struct Metered {
    pub expr: IdedExpr,
    pub estimate: u64,
}

/// Writes the charges into `expr` and estimates their sum.
pub(super) fn meter(expr: &IdedExpr) -> Metered {
    let mut walk = Walk::default();
    let mut unit = Unit::default();
    let (metered, _) = walk.node(expr, &mut unit);
    let nodes = unit.nodes;
    Metered {
        expr: charge(metered, nodes, How::Fixed),
        estimate: unit.cost.saturating_add(nodes),
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
}

fn charge(value: IdedExpr, units: u64, how: How) -> IdedExpr {
    let literal = |number: i64| IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Int(number.into())),
    };
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: CHARGE.to_owned(),
            target: None,
            args: vec![
                value,
                literal(i64::try_from(units).unwrap_or(i64::MAX)),
                literal(how as i64),
            ],
        }),
    }
}

mod sizes;
mod walk;
