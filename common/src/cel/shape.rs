//! The bounds every expression meets before it is parsed: its length, its number of tokens and
//! its nesting depth, measured by one pass over the text that keeps its own stack and never
//! recurses. Everything after it recurses — the parser, the checks, the cost walk, the
//! interpreter, dropping the syntax tree — once per level of the tree, so a bound on the depth
//! is a bound on the stack all of them use ([`super::stack`] runs them on a stack that covers
//! it). A depth counted in brackets alone misses chains: `1 + 1 + … + 1` has no bracket and is
//! as deep as it is long, so every operator in a chain counts one, as cel-go's parser counts
//! them against `ParserRecursionLimit`. `&&` and `||` chains are the exception: the parser
//! builds them as balanced trees, so a chain of `n` terms counts `log2(n)`.
//!
//! The count is an upper bound on the syntax tree's depth, never below it: every operator of a
//! term is counted as if it stood on one path (an opening bracket is one of them: a call or an
//! index nests what it applies to), and each bracket adds [`GROUP_DEPTH`], which covers the
//! levels a macro (`all`, `exists`, `map`, …) adds when it is expanded.

use super::errors::CompileError;

/// The longest expression admitted, in bytes: also the CRDs' `maxLength` for every expression.
pub const MAX_SOURCE_BYTES: usize = 4_096;

/// The most tokens (names, literals, operators, brackets) an expression may have.
pub const MAX_TOKENS: usize = 1_024;

/// The deepest an expression may nest, counted as this module says.
pub const MAX_DEPTH: u32 = 100;

/// What a bracket adds to the depth: itself, and the levels a macro's expansion adds.
pub const GROUP_DEPTH: u32 = 3;

/// The size of an expression, as measured before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub bytes: usize,
    pub tokens: usize,
    pub depth: u32,
}

/// Measures `source`, and refuses it if it is past any bound.
pub fn check(source: &str) -> Result<Shape, CompileError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(CompileError::TooLong {
            bytes: source.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    let shape = measure(source)?;
    if shape.tokens > MAX_TOKENS {
        return Err(CompileError::TooManyTokens {
            tokens: shape.tokens,
            limit: MAX_TOKENS,
        });
    }
    if shape.depth > MAX_DEPTH {
        return Err(CompileError::TooDeep {
            depth: shape.depth,
            limit: MAX_DEPTH,
        });
    }
    Ok(shape)
}

/// One comma-separated item of a bracket: its terms joined by `&&` or `||`.
#[derive(Default)]
struct Item {
    /// Terms closed so far by `&&` or `||`.
    terms: u32,
    /// The deepest closed term.
    deepest: u32,
    /// The open term's operators.
    operators: u32,
    /// The deepest bracket in the open term.
    child: u32,
    /// `?` and `:` seen: each nests what follows.
    branches: u32,
}

impl Item {
    fn close_term(&mut self) {
        self.deepest = self.deepest.max(self.operators.saturating_add(self.child));
        self.operators = 0;
        self.child = 0;
        self.terms = self.terms.saturating_add(1);
    }

    fn depth(mut self) -> u32 {
        self.close_term();
        let chain = u32::BITS - (self.terms.saturating_sub(1)).leading_zeros();
        self.deepest
            .saturating_add(chain)
            .saturating_add(self.branches)
            .saturating_add(1)
    }
}

/// An open bracket: its deepest item so far and the item being read.
#[derive(Default)]
struct Group {
    close: u8,
    deepest: u32,
    item: Item,
}

impl Group {
    fn depth(mut self) -> u32 {
        self.close_item();
        self.deepest
    }

    fn close_item(&mut self) {
        let item = std::mem::take(&mut self.item);
        self.deepest = self.deepest.max(item.depth());
    }
}

/// The depth [`check`] would measure, or `None` if `source` does not scan.
pub fn measure_depth(source: &str) -> Option<u32> {
    measure(source).ok().map(|shape| shape.depth)
}

fn measure(source: &str) -> Result<Shape, CompileError> {
    let bytes = source.as_bytes();
    let mut stack = vec![Group::default()];
    let mut tokens = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        if bytes[at..].starts_with(b"//") {
            at = line_end(bytes, at);
            continue;
        }
        tokens += 1;
        let Some(group) = stack.last_mut() else {
            return Err(stray(byte));
        };
        if let Some(end) = literal_end(bytes, at)? {
            at = end;
            continue;
        }
        if byte.is_ascii_alphanumeric() || byte == b'_' {
            let start = at;
            at = word_end(bytes, at);
            if &bytes[start..at] == b"in" {
                group.item.operators = group.item.operators.saturating_add(1);
            }
            continue;
        }
        let two = bytes.get(at..at + 2).unwrap_or_default();
        match (byte, two) {
            (_, b"&&" | b"||") => {
                group.item.close_term();
                at += 2;
            }
            (_, b"==" | b"!=" | b"<=" | b">=" | b"?.") => {
                group.item.operators = group.item.operators.saturating_add(1);
                at += 2;
            }
            (b'(' | b'[' | b'{', _) => {
                // A call or an index nests what it applies to (`a["x"]["y"]`), so an opening
                // counts in its term as an operator does, as well as adding its own depth.
                group.item.operators = group.item.operators.saturating_add(1);
                let close = match byte {
                    b'(' => b')',
                    b'[' => b']',
                    _ => b'}',
                };
                stack.push(Group {
                    close,
                    ..Group::default()
                });
                at += 1;
            }
            (b')' | b']' | b'}', _) => {
                let Some(inner) = stack.pop().filter(|inner| inner.close == byte) else {
                    return Err(stray(byte));
                };
                if stack.is_empty() {
                    return Err(stray(byte));
                }
                let depth = inner.depth().saturating_add(GROUP_DEPTH);
                if let Some(outer) = stack.last_mut() {
                    outer.item.child = outer.item.child.max(depth);
                }
                at += 1;
            }
            (b',', _) => {
                group.close_item();
                at += 1;
            }
            (b'?' | b':', _) => {
                group.item.close_term();
                group.item.branches = group.item.branches.saturating_add(1);
                at += 1;
            }
            _ => {
                group.item.operators = group.item.operators.saturating_add(1);
                at += 1;
            }
        }
    }
    let depth = match stack.pop() {
        Some(top) if stack.is_empty() => top.depth(),
        Some(open) => return Err(unclosed(open.close)),
        None => 0,
    };
    Ok(Shape {
        bytes: source.len(),
        tokens,
        depth,
    })
}

fn stray(bracket: u8) -> CompileError {
    CompileError::Syntax(format!("`{}` closes no bracket", char::from(bracket)))
}

fn unclosed(close: u8) -> CompileError {
    CompileError::Syntax(format!(
        "a bracket is never closed with `{}`",
        char::from(close)
    ))
}

fn line_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&byte| byte == b'\n')
        .map_or(bytes.len(), |offset| at + offset)
}

fn word_end(bytes: &[u8], at: usize) -> usize {
    let mut end = at;
    while end < bytes.len() {
        let byte = bytes[end];
        let number_dot = byte == b'.'
            && bytes[at].is_ascii_digit()
            && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
        let exponent_sign = matches!(byte, b'+' | b'-')
            && bytes[at].is_ascii_digit()
            && matches!(bytes.get(end.wrapping_sub(1)), Some(b'e' | b'E'));
        if byte.is_ascii_alphanumeric() || byte == b'_' || number_dot || exponent_sign {
            end += 1;
        } else {
            break;
        }
    }
    end
}

/// Where the string, bytes or quoted-name literal starting at `at` ends, if one starts there:
/// any of the prefixes `r`, `b` (either case, either order), then `'`, `"`, `'''` or `"""`, or a
/// backquoted name.
fn literal_end(bytes: &[u8], at: usize) -> Result<Option<usize>, CompileError> {
    let mut quote_at = at;
    let mut raw = false;
    while quote_at < bytes.len() && quote_at - at < 2 {
        match bytes[quote_at] {
            b'r' | b'R' => raw = true,
            b'b' | b'B' => {}
            _ => break,
        }
        quote_at += 1;
    }
    let Some(&quote) = bytes.get(quote_at) else {
        return Ok(None);
    };
    if !matches!(quote, b'\'' | b'"' | b'`') {
        return Ok(None);
    }
    // A prefix is only a prefix when a quote follows it at once (`rb'x'`, not `rbx'`).
    if quote_at > at && (quote == b'`' || !bytes[at..quote_at].iter().all(u8::is_ascii_alphabetic))
    {
        return Ok(None);
    }
    let triple = quote != b'`' && bytes[quote_at..].starts_with(&[quote; 3]);
    let open = if triple { 3 } else { 1 };
    let mut index = quote_at + open;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'\\' && !raw {
            index += 2;
            continue;
        }
        if !triple && byte == b'\n' {
            break;
        }
        if triple && bytes[index..].starts_with(&[quote; 3]) {
            return Ok(Some(index + 3));
        }
        if !triple && byte == quote {
            return Ok(Some(index + 1));
        }
        index += 1;
    }
    Err(CompileError::Syntax(format!(
        "the literal that starts at byte {at} is not closed"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(source: &str) -> u32 {
        measure(source).expect("measured").depth
    }

    #[test]
    fn chains_count_each_operator_and_logic_chains_their_logarithm() {
        assert_eq!(depth("1"), 1);
        assert_eq!(depth("1 + 1 + 1 + 1"), 4);
        assert_eq!(depth("a || b || c || d"), 3);
        assert!(depth(&vec!["1"; 900].join(" + ")) > MAX_DEPTH);
        assert!(depth(&vec!["a"; 900].join(" || ")) < 20);
    }

    #[test]
    fn brackets_add_their_depth_and_strings_hide_theirs() {
        // Each bracket: one in its term, its own depth, and its item's one.
        assert_eq!(depth("((1))"), 1 + 2 * (GROUP_DEPTH + 2));
        assert!(depth(&format!("object{}", "[\"a\"]".repeat(200))) > MAX_DEPTH);
        assert!(depth(&format!("f{}", "(1)".repeat(200))) > MAX_DEPTH);
        assert_eq!(depth(r#"")))(((" + '"' + """)""" + r'\'"#), 4);
        assert_eq!(depth("// ((((\n1"), 1);
    }

    #[test]
    fn unbalanced_brackets_and_open_literals_are_syntax_errors() {
        for source in ["(1", "1)", "[1)", "'open", "\"\"\"open"] {
            assert!(
                matches!(measure(source), Err(CompileError::Syntax(_))),
                "{source}"
            );
        }
    }

    #[test]
    fn numbers_and_names_are_one_token() {
        let shape = measure("object.spec.replicas + 1.5e-3 - 0x1F").expect("measured");
        assert_eq!(shape.tokens, 9);
    }
}
