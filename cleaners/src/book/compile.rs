//! A Cleaner's conditions compiled on the evaluator, not on the Cleaners' loop: sixteen
//! conditions of up to 2 ms each in a release build (`cargo run --release -p
//! kube-retention-common --example compile_time`), and a namespace editor may rewrite a Cleaner
//! as often as the API server lets them. A spec is compiled when it is first evaluated — so a
//! replica that does not lead compiles nothing — as work of its namespace
//! ([`crate::compile`]), charged to its share; until its judge comes back the Cleaner
//! waits, and a new spec asks afresh (the judge of an older one is dropped on arrival). A spec
//! without conditions has no CEL to compile: its judge is made at once, on the loop.

use std::sync::Arc;

use kube_retention_common::FieldError;
use kube_retention_common::cleaner::{CleanerSpec, Judge};

use super::{Book, CleanerKey};

/// A spec compiled: its judge, or what is wrong with the spec.
pub type CompiledSpec = Result<Arc<Judge>, Vec<FieldError>>;

/// A spec's judge: not asked for yet, asked for (the request's `seq`), or compiled.
#[derive(Debug)]
pub(super) enum Judgement {
    Uncompiled,
    Compiling(u64),
    Compiled(CompiledSpec),
}

impl Judgement {
    /// Whether request `seq` is the one awaited.
    fn awaits(&self, seq: u64) -> bool {
        matches!(self, Self::Compiling(asked) if *asked == seq)
    }
}

/// `spec`'s judge, or what is wrong with it: CPU in proportion to its conditions.
fn compile(spec: &CleanerSpec) -> CompiledSpec {
    Judge::new(spec).map(Arc::new)
}

/// The judge of a Cleaner's spec, to compile off the loop.
#[derive(Debug, Clone)]
pub struct CompileRequest {
    pub key: CleanerKey,
    /// Which request of `key`'s this is: only the latest one's judge is kept.
    pub seq: u64,
    pub spec: CleanerSpec,
}

impl CompileRequest {
    /// The judge of the spec, or what is wrong with it: CPU in proportion to its conditions.
    pub fn compile(&self) -> CompiledSpec {
        compile(&self.spec)
    }

    /// About how many bytes the request holds: what the evaluator's backlog bounds.
    pub fn bytes(&self) -> usize {
        let conditions: usize = self.spec.conditions.iter().map(String::len).sum();
        conditions.saturating_add(1024)
    }
}

impl Book {
    /// `key`'s judge where compiled (made now where its spec has no conditions); else the
    /// request for it where it had not been asked for (asking now), `None` where it has been
    /// (or `key` is gone).
    pub(super) fn judge_or_request(
        &mut self,
        key: &CleanerKey,
    ) -> Result<CompiledSpec, Option<Box<CompileRequest>>> {
        let seq = self.seq + 1;
        let tracked = self.cleaners.get_mut(key).ok_or(None)?;
        match &tracked.judge {
            Judgement::Compiled(judge) => Ok(judge.clone()),
            Judgement::Compiling(_) => Err(None),
            Judgement::Uncompiled if tracked.spec.conditions.is_empty() => {
                let judge = compile(&tracked.spec);
                tracked.judge = Judgement::Compiled(judge.clone());
                Ok(judge)
            }
            Judgement::Uncompiled => {
                self.seq = seq;
                tracked.judge = Judgement::Compiling(seq);
                Err(self.compile_again(key, seq).map(Box::new))
            }
        }
    }

    /// The judge asked for by request `seq` of `key`: kept, and the Cleaner woken to be
    /// evaluated, where it is still the latest request.
    pub fn compiled(&mut self, key: &CleanerKey, seq: u64, judge: CompiledSpec) {
        if self.keep_compiled(key, seq, judge) {
            self.woken.insert(key.clone());
        }
    }

    /// Keeps `judge` where request `seq` is still the latest of `key`: whether it was.
    pub fn keep_compiled(&mut self, key: &CleanerKey, seq: u64, judge: CompiledSpec) -> bool {
        match self.cleaners.get_mut(key) {
            Some(tracked) if tracked.judge.awaits(seq) => {
                tracked.judge = Judgement::Compiled(judge);
                true
            }
            _ => false,
        }
    }

    /// Request `seq` of `key`, where it is still the latest (again, where the evaluator let go
    /// of it).
    pub fn compile_again(&self, key: &CleanerKey, seq: u64) -> Option<CompileRequest> {
        let tracked = self.cleaners.get(key)?;
        tracked.judge.awaits(seq).then(|| CompileRequest {
            key: key.clone(),
            seq,
            spec: tracked.spec.clone(),
        })
    }

    /// Request `seq` of `key` will not be answered (let go of while this replica did not
    /// lead): asked for again at the Cleaner's next evaluation.
    pub fn compile_abandoned(&mut self, key: &CleanerKey, seq: u64) {
        if let Some(tracked) = self.cleaners.get_mut(key)
            && tracked.judge.awaits(seq)
        {
            tracked.judge = Judgement::Uncompiled;
            self.woken.insert(key.clone());
        }
    }
}
