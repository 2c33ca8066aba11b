//! Policies being compiled, in the loop: a policy's new generation goes to the evaluator
//! ([`kube_retention_evaluator::compile`]) and is loaded into the state when it comes back — unless a
//! newer generation, or the policy's deletion, came first. Until then the state keeps the
//! generation it had (as it did while the watch had not yet brought the new one).

use std::collections::HashMap;

use kube_retention_common::field_error::FieldError;
use kube_retention_common::policies::{PolicyKey, Rules, RulesSource};
use tokio::sync::mpsc;

use kube_retention_evaluator::{Compiled, Evaluator, PolicyCompile};
use kube_retention_state::Approval;

/// A policy's rules as read, with every error found.
pub type Read = (Rules, Vec<FieldError>);

/// A generation of a policy sent to be compiled.
#[derive(Debug, Clone)]
pub struct Pending {
    pub seq: u64,
    pub generation: Option<i64>,
    pub approval: Approval,
    /// Kept to send again if the evaluator lets go of it ([`Compiled::read`] `None`).
    source: RulesSource,
}

/// The latest compilation asked for, by policy.
pub struct Compiles {
    evaluator: Evaluator,
    sender: mpsc::UnboundedSender<Compiled>,
    results: mpsc::UnboundedReceiver<Compiled>,
    pending: HashMap<PolicyKey, Pending>,
    next: u64,
}

impl Compiles {
    pub fn new(evaluator: Evaluator) -> Self {
        let (sender, results) = mpsc::unbounded_channel();
        Self {
            evaluator,
            sender,
            results,
            pending: HashMap::new(),
            next: 0,
        }
    }

    /// Sends `key`'s `generation` to be compiled from `source`, in place of any under way.
    pub fn submit(
        &mut self,
        key: PolicyKey,
        generation: Option<i64>,
        approval: Approval,
        source: RulesSource,
    ) {
        self.next += 1;
        let pending = Pending {
            seq: self.next,
            generation,
            approval,
            source,
        };
        self.send(&key, &pending, false);
        self.pending.insert(key, pending);
    }

    fn send(&self, key: &PolicyKey, pending: &Pending, returning: bool) {
        let work = PolicyCompile::policy(
            key.clone(),
            pending.seq,
            pending.source.clone(),
            self.sender.clone(),
        )
        .returning(returning);
        if !self.evaluator.submit(Box::new(work)) {
            tracing::error!("the CEL evaluator's thread has ended; policy changes no longer apply");
        }
    }

    /// The next compilation to come back.
    pub async fn recv(&mut self) -> Option<Compiled> {
        self.results.recv().await
    }

    /// The generation and approval of `key` under way, if any.
    pub fn pending(&self, key: &PolicyKey) -> Option<&Pending> {
        self.pending.get(key)
    }

    /// `key` went: what is under way for it no longer counts.
    pub fn forget(&mut self, key: &PolicyKey) {
        self.pending.remove(key);
    }

    /// Forgets what is under way for the policies `kept` does not keep (gone while the
    /// controller was not watching).
    pub fn forget_unseen(&mut self, kept: impl Fn(&PolicyKey) -> bool) {
        self.pending.retain(|key, _| kept(key));
    }

    /// What came back: the pending generation it compiled, its key and its rules read, if it
    /// is still the latest. Work the evaluator let go of is sent again, first in its lane, if
    /// still the latest; the evaluator is told otherwise that it will not come back.
    pub fn take(&mut self, compiled: Compiled) -> Option<(Pending, PolicyKey, Read)> {
        let Compiled { key, seq, read } = compiled;
        let latest = self
            .pending
            .get(&key)
            .is_some_and(|pending| pending.seq == seq);
        let Some(read) = read else {
            match latest {
                true => self.send(&key, &self.pending[&key], true),
                false => self.evaluator.nothing_returned(),
            }
            return None;
        };
        if !latest {
            return None;
        }
        let pending = self.pending.remove(&key)?;
        Some((pending, key, read))
    }
}
