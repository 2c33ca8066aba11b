//! How far a reader of a spec goes with its expressions ([`Check`]): compile them, as evaluation
//! needs, or only bound them ([`super::shape`]: empty, too long, too many tokens, too deep),
//! which reads the text once without parsing it. The webhook reads a policy or a Cleaner bounded
//! first, on its async workers, and compiles it off them once its writer may make it.

use super::errors::CompileError;
use super::{Expect, Expression, shape};

/// Compile, or only bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Check {
    #[default]
    Compile,
    Shape,
}

impl Expression {
    /// `source` compiled over `declared` ([`Check::Compile`]), or only bounded ([`Check::Shape`]:
    /// `None` within the bounds); or what is wrong with it.
    pub fn checked(
        source: &str,
        expect: Expect,
        declared: &[&str],
        check: Check,
    ) -> Result<Option<Self>, CompileError> {
        match check {
            Check::Compile => Self::compile_over(source, expect, declared).map(Some),
            Check::Shape if source.trim().is_empty() => Err(CompileError::Empty(expect)),
            Check::Shape => shape::check(source).map(|_| None),
        }
    }
}
