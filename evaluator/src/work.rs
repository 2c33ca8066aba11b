//! What the evaluator runs: a piece of [`Work`] that a tenant's input caused — a policy's
//! expressions on one object, a Cleaner's conditions over its targets, a policy's expressions
//! or a Cleaner's conditions compiled — done a [`Work::step`] at
//! a time, each step one expression on one object (or the conversion of the object before
//! them), so that the evaluator can turn to another namespace between any two.
//!
//! The work owns its result and where it goes: [`Work::finish`] hands it to whoever submitted
//! it. A work that the backlog must let go of to stay within its memory bound is
//! [`Work::shed`] into a token that keeps its place in line and, at its turn, asks its
//! submitter for it again.

use std::sync::Arc;

use kube_retention_state::ObjectKey;

use crate::sandbox::Sandbox;

/// Which work a newer one replaces: the same object, the same Cleaner's evaluation, or the
/// compilation of the same policy or Cleaner (within a namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkKey {
    Object(ObjectKey),
    Cleaner(Arc<str>),
    Policy(Arc<str>),
    CleanerSpec(Arc<str>),
}

/// Where a work is after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More steps to go.
    More,
    /// Complete: [`Work::finish`] hands over its result.
    Done,
}

pub trait Work: Send {
    /// The namespace whose share of the evaluator's time pays for it.
    fn namespace(&self) -> &Arc<str>;

    /// What a newer work of the same key supersedes.
    fn key(&self) -> WorkKey;

    /// Runs one unit: one expression on one object, or the conversion the expressions need,
    /// evaluating in `sandbox`.
    fn step(&mut self, sandbox: &mut Sandbox) -> Progress;

    /// About how many bytes it holds now: what the backlog bounds.
    fn weight(&self) -> usize;

    /// Hands its result to whoever submitted it.
    fn finish(self: Box<Self>);

    /// Lets go of what it holds: the token left asks the submitter for the work again at its
    /// turn, and weighs nothing.
    fn shed(self: Box<Self>) -> Box<dyn Work>;

    /// Whether this is shed work coming back, asked for at its turn: it goes first in its
    /// namespace's lane, the place it had.
    fn returning(&self) -> bool {
        false
    }
}

/// What shed work leaves in its place ([`Work::shed`]): it keeps the place in line, weighs
/// nothing, and at its turn asks the submitter for the work again (`ask_again`). Policies' and
/// Cleaners' work leave the same token; only what they ask with differs.
pub struct Token {
    namespace: Arc<str>,
    key: WorkKey,
    ask_again: Box<dyn FnOnce() + Send>,
}

impl Token {
    /// The token of shed work of `namespace` and `key`.
    pub fn asking_again(
        namespace: Arc<str>,
        key: WorkKey,
        ask_again: impl FnOnce() + Send + 'static,
    ) -> Box<dyn Work> {
        Box::new(Self {
            namespace,
            key,
            ask_again: Box::new(ask_again),
        })
    }
}

impl Work for Token {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        self.key.clone()
    }

    fn step(&mut self, _: &mut Sandbox) -> Progress {
        Progress::Done
    }

    fn weight(&self) -> usize {
        0
    }

    fn finish(self: Box<Self>) {
        (self.ask_again)();
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        self
    }
}
