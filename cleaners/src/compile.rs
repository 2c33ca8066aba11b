//! A Cleaner's spec compiled as evaluator work of its namespace, the very work a policy's is
//! ([`Compilation`]): one step compiles every condition, bounded before parsing (each
//! condition's size, tokens and depth, `common::cel::shape`; sixteen at most), charged to the
//! namespace's share, and a newer request for the same Cleaner replaces one waiting. The judge
//! goes back to the Cleaners' loop ([`CleanerOutcome::Compiled`]); shed, the request leaves a
//! token that asks the loop for it again.

use std::sync::Arc;

use kube_retention_evaluator::{Compilation, Compile, WorkKey};
use tokio::sync::mpsc;

use super::book::{CompileRequest, CompiledSpec};
use super::judging::CleanerOutcome;

/// One Cleaner's compilation: its request until the step, its judge after; neither once shed.
pub type CleanerCompile = Compilation<CompileRequest>;

impl Compile for CompileRequest {
    type Output = CompiledSpec;

    fn bytes(&self) -> usize {
        CompileRequest::bytes(self)
    }

    fn compile(self) -> CompiledSpec {
        CompileRequest::compile(&self)
    }
}

/// Compiles `request`; the judge goes to `results`. `returning`: it was shed, and is asked for
/// again at its turn.
pub fn cleaner_compile(
    request: CompileRequest,
    results: mpsc::UnboundedSender<CleanerOutcome>,
    returning: bool,
) -> CleanerCompile {
    let lane = Arc::from(request.key.namespace.as_str());
    let work = WorkKey::CleanerSpec(Arc::from(request.key.name.as_str()));
    let (key, seq) = (request.key.clone(), request.seq);
    let deliver = move |judge| {
        results
            .send(CleanerOutcome::Compiled { key, seq, judge })
            .ok();
    };
    Compilation::new(lane, work, request, Box::new(deliver)).returning(returning)
}
