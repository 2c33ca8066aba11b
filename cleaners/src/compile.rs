//! A Cleaner's spec compiled as evaluator [`Work`] of its namespace, the way a policy's is
//! (`kube_retention_evaluator::compile`): one step compiles every condition, bounded before parsing
//! (each condition's size, tokens and depth, `common::cel::shape`; sixteen at most), charged to
//! the namespace's share, and a newer request for the same Cleaner replaces one waiting. The
//! judge goes back to the Cleaners' loop ([`CleanerOutcome::Compiled`]); shed, the request
//! leaves a token that asks the loop for it again.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::book::{CleanerKey, CompileRequest, CompiledSpec};
use super::judging::CleanerOutcome;
use kube_retention_evaluator::{Progress, Work, WorkKey};

/// One Cleaner's compilation: its request until the step, its judge after; neither once shed.
pub struct CleanerCompile {
    namespace: Arc<str>,
    key: CleanerKey,
    seq: u64,
    request: Option<CompileRequest>,
    judge: Option<CompiledSpec>,
    results: mpsc::UnboundedSender<CleanerOutcome>,
    returning: bool,
}

impl CleanerCompile {
    /// Compiles `request`; the judge goes to `results`. `returning`: it was shed, and is
    /// asked for again at its turn.
    pub fn new(
        request: CompileRequest,
        results: mpsc::UnboundedSender<CleanerOutcome>,
        returning: bool,
    ) -> Self {
        Self {
            namespace: Arc::from(request.key.namespace.as_str()),
            key: request.key.clone(),
            seq: request.seq,
            request: Some(request),
            judge: None,
            results,
            returning,
        }
    }
}

impl Work for CleanerCompile {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::CleanerSpec(Arc::from(self.key.name.as_str()))
    }

    fn step(&mut self) -> Progress {
        if let Some(request) = self.request.take() {
            self.judge = Some(request.compile());
        }
        Progress::Done
    }

    fn weight(&self) -> usize {
        self.request.as_ref().map_or(0, CompileRequest::bytes)
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(self: Box<Self>) {
        let Self {
            key,
            seq,
            judge,
            results,
            ..
        } = *self;
        results
            .send(CleanerOutcome::Compiled { key, seq, judge })
            .ok();
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        Box::new(Self {
            request: None,
            judge: None,
            ..*self
        })
    }
}
