//! The stack CEL's recursion runs on. The parser, the checks, the cost walk and the interpreter
//! each recurse once per level of an expression's syntax tree, and [`super::shape`] bounds that
//! depth before any of them starts; this module makes sure the stack under them covers the
//! bound, wherever they are called from (a tokio worker has 2 MiB, a thread the caller made may
//! have less). Where less than [`STACK_BYTES`] is left, the work runs on a stack of that size
//! made for it (`stacker`, the crate rustc grows its own stack with); elsewhere in place.
//!
//! [`STACK_BYTES`] is the most the deepest admitted expressions were measured to use, in a
//! debug build, with a margin: `make bench-cel-stack` measures it in a debug and a release build
//! (`common/tests/cel_stack.rs` prints each shape's peak), and `common/tests/cel_hostile.rs`
//! runs the deepest shapes at the limit on a thread of exactly this size.

/// The stack every compilation and evaluation has at least.
pub const STACK_BYTES: usize = 16 * 1024 * 1024;

/// Runs `work` with at least [`STACK_BYTES`] of stack.
pub(super) fn deep<T>(work: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(STACK_BYTES, STACK_BYTES, work)
}
