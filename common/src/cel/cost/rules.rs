//! Every function an expression may call, and what one call costs from the sizes of its
//! operands: the work it does and what it makes, charged before it runs. A function that is not
//! in [`OFFERED`](super::offered::OFFERED) does not compile, so no call escapes the meter; one the interpreter adds in a
//! later version stays out until it is given a rule here.
//!
//! One formula serves both sides: the walk applies it to the bounds it knows at admission, the
//! meter to the operands' actual sizes just before the call, so an estimate within the limit
//! stays within it on any object within the bounds. What a call makes is charged with what it
//! reads, so memory is bounded with time: a byte made costs what a byte read does (a tenth of a
//! unit), a list item made [`MADE_ITEM`] units (a string in a list is about a hundred bytes of
//! allocations) or one unit where it is a copy of a value that exists already.
//!
//! Against Kubernetes' cost functions (k8s.io/apiserver `pkg/cel/library/cost.go`), in the same
//! units: `replace`, `split` and `join` are charged as there, with the result's size (there,
//! `split` and `replace` are charged on the input alone at run time); searches (`indexOf`,
//! `lastIndexOf`, `contains`) are charged as the product of the two sizes, where Kubernetes
//! charges one traversal: the implementations here compare at each position; `distinct` and the
//! `sets` functions pairwise; `lists.range` by the list it makes; `format` and `flatten` are not
//! offered (a precision such as `%.900000000f` makes a string out of nothing, and `flatten`'s
//! result is as large as the nesting of its input).

/// What one operand of a call weighs: at run time its actual size, at admission its bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    /// A string's or bytes' own length.
    pub text: u64,
    /// A list's or map's items.
    pub items: u64,
    /// The text of a list's or map's items (and keys), added up.
    pub inner: u64,
    /// The longest of those.
    pub widest: u64,
    /// A string's length where it is known to be at least that (a separator); 0 if unknown.
    pub least: u64,
    /// A whole number's value (0 for a negative one or another type).
    pub number: u64,
    /// What copying the whole value costs: a unit a value (items nested included: each is an
    /// allocation) and a unit per [`COMPARED_BYTES`] of text.
    pub deep: u64,
    /// How many of a list's or map's items are strings (or bytes).
    pub strings: u64,
}

/// What `join` writes for an item that is not a string, which kube-cel renders with Rust's
/// `Debug` (`Int(5)`, `List([String("a")])`): at most this many bytes a scalar...
pub const RENDERED_SCALAR: u64 = 48;
/// ...and, for an item holding others, this many bytes per unit of what copying it costs
/// ([`Extent::deep`]: a unit a value, a unit per ten bytes of text; `Debug` writes a value's
/// name and brackets, and a control character as six bytes).
pub const RENDERED_PER_UNIT: u64 = 64;

/// How a function's cost follows from its operands (the target first, then the arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The same whatever the operands: an accessor, arithmetic, `size`.
    Fixed,
    /// Reads each operand once, and makes at most `grows` times what it read.
    Linear { grows: u64 },
    /// `+`: makes a copy of both operands.
    Concat,
    /// `==`, `<`, …: compares up to the shorter operand (a list item by item, which is not
    /// charged: the clock, read at every charge, bounds it, and it makes nothing).
    Compare,
    /// `x in list`: compares the needle with each item.
    In,
    /// `s.replace(from, to)`.
    Replace,
    /// `s.split(separator)`.
    Split,
    /// `list.join(separator)`.
    Join,
    /// A search for the second operand at each position of the first (`indexOf`, `contains`).
    Search,
    /// A regular expression over a string; `all` makes a list of every match.
    Regex { all: bool },
    /// Each item of one list against each of another (or of itself: `distinct`).
    Pairs,
    /// A sort: `n log n` comparisons.
    Sort,
    /// `lists.range(n)`: a list of `n` numbers.
    Range,
}

/// What a list item made costs, where it is a new string.
pub const MADE_ITEM: u64 = 4;

/// Bytes compared or copied for a unit: a comparison or a copy runs at memory speed, about ten bytes a
/// nanosecond, where reading text to work on it (a tenth of a unit per byte) runs at about one
/// byte a nanosecond; a unit is 40 to 90 ns.
pub const COMPARED_BYTES: u64 = 1024;

/// How many times an operand of a costed call is copied whole: the interpreter (the `cel`
/// crate) passes values to a function as a copy and takes its result back as another, and the
/// meter's own function is one: in and out of it, and into the call itself.
pub const COPIES: u64 = 3;

/// What a call by `rule` costs with these operands: the rule's units, and the copies of its
/// operands ([`COPIES`]).
pub fn call_units(rule: Rule, operands: &[Extent]) -> u64 {
    let copies = operands.iter().fold(0u64, |sum, operand| {
        sum.saturating_add(operand.deep.saturating_mul(COPIES))
    });
    units(rule, operands).saturating_add(copies)
}

/// Units for `bytes` of text read or made.
fn text(bytes: u64) -> u64 {
    bytes.div_ceil(10)
}

/// Units for `bytes` compared or copied ([`COMPARED_BYTES`]).
pub fn compared(bytes: u64) -> u64 {
    bytes / COMPARED_BYTES
}

/// What a call with these operands costs beyond its own node. Operands not yet evaluated are
/// given as zero: every rule is at its largest with a separator of unknown length.
pub fn units(rule: Rule, operands: &[Extent]) -> u64 {
    let zero = Extent::default();
    let at = |index: usize| operands.get(index).copied().unwrap_or(zero);
    let (a, b, c) = (at(0), at(1), at(2));
    let read = |e: &Extent| text(e.text).saturating_add(e.items);
    match rule {
        Rule::Fixed => 0,
        Rule::Linear { grows } => {
            let (mut bytes, mut items, mut cost) = (0u64, 0u64, 0u64);
            for operand in operands {
                bytes = bytes.saturating_add(operand.text);
                items = items.saturating_add(operand.items);
                cost = cost.saturating_add(read(operand));
            }
            let made = text(grows.saturating_mul(bytes.saturating_add(32)))
                .saturating_add(grows.saturating_mul(items));
            cost.saturating_add(made)
        }
        Rule::Concat => read(&a).saturating_add(read(&b)),
        Rule::Compare => compared(a.text.min(b.text)),
        Rule::In => b.items.saturating_mul(1 + compared(a.text)),
        Rule::Replace => {
            let count = match b.least {
                0 => a.text.saturating_add(1),
                least => a.text / least,
            };
            let made = a.text.saturating_add(count.saturating_mul(c.text));
            text(a.text.saturating_mul(2)).saturating_add(text(made))
        }
        Rule::Split => {
            // An empty separator splits between every two characters and at both ends.
            let pieces = match b.least {
                0 => a.text.saturating_add(2),
                least => a.text / least + 1,
            };
            text(a.text.saturating_mul(2)).saturating_add(pieces.saturating_mul(MADE_ITEM))
        }
        Rule::Join => {
            // Items that are not strings are rendered: scalars a few bytes, nested values by
            // what copying them costs beyond a list of plain strings'.
            let plain = 1u64
                .saturating_add(a.items)
                .saturating_add(compared(a.inner));
            let nested = a.deep.saturating_sub(plain);
            let rendered = a
                .items
                .saturating_sub(a.strings)
                .saturating_mul(RENDERED_SCALAR)
                .saturating_add(nested.saturating_mul(RENDERED_PER_UNIT));
            let made = a
                .inner
                .saturating_add(a.items.saturating_mul(b.text))
                .saturating_add(rendered);
            a.items.saturating_add(text(made.saturating_mul(2)))
        }
        Rule::Search => {
            let haystack = read(&a).saturating_add(text(a.inner));
            haystack.saturating_mul(1 + text(b.text))
        }
        Rule::Regex { all } => {
            let search = (1 + text(a.text)).saturating_mul(1 + b.text.div_ceil(4));
            let made = match all {
                true => text(a.text).saturating_add(a.text.saturating_add(1) * MADE_ITEM),
                false => text(a.text),
            };
            search.saturating_add(made)
        }
        Rule::Pairs => {
            let other = if operands.len() > 1 { b } else { a };
            let each = 1 + compared(a.widest.max(other.widest));
            a.items
                .saturating_mul(other.items)
                .saturating_mul(each)
                .saturating_add(a.items)
        }
        Rule::Sort => {
            let n = a.items;
            let log = u64::from(u64::BITS - n.leading_zeros());
            n.saturating_mul(1 + log)
                .saturating_mul(1 + compared(a.widest))
                .saturating_add(n)
        }
        Rule::Range => a.number,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(len: u64) -> Extent {
        Extent {
            text: len,
            least: len,
            ..Extent::default()
        }
    }

    #[test]
    fn what_a_call_makes_is_charged_before_it_runs() {
        let big = string(20_000);
        // `replace("a", big)` over `big`: 20,000 copies of 20,000 bytes.
        let replace = units(Rule::Replace, &[big, string(1), big]);
        assert!(replace > 40_000_000, "{replace}");
        assert!(
            units(
                Rule::Range,
                &[Extent {
                    number: 5_000_000,
                    ..Extent::default()
                }]
            ) > 1_000_000
        );
        // The same call with a separator not yet evaluated is charged at its largest.
        assert!(units(Rule::Split, &[big]) >= units(Rule::Split, &[big, string(3)]));
    }

    #[test]
    fn quadratic_functions_are_charged_quadratically() {
        let list = Extent {
            items: 60_000,
            inner: 120_000,
            widest: 2,
            ..Extent::default()
        };
        assert!(units(Rule::Pairs, &[list]) >= 3_600_000_000);
        let search = units(Rule::Search, &[string(150_000), string(75_000)]);
        assert!(search > 100_000_000, "{search}");
    }
}
