//! A retention policy's expressions compiled on the evaluator, as work of its namespace: each
//! of up to five expressions takes up to 2 ms to parse, check and estimate in a release build
//! (a 1,000-token `&&` chain; `cargo run --release -p kube-retention-common --example
//! compile_time`), more on a loaded machine, and a namespace editor may rewrite a policy as
//! often as the API server lets them. On the loop that schedules deletions every edit would
//! hold up every tenant's deadlines; here it is charged to the namespace that wrote it, and
//! edits faster than they compile coalesce into the latest.
//!
//! One step compiles the whole policy: what it takes is bounded before parsing (every
//! expression's size, tokens and depth, `common::cel::shape`) to about one evaluation stopped
//! at its limit. ClusterRetentionPolicies, written by admins, take turns in a lane of their own,
//! [`CLUSTER_LANE`] (no namespace has an empty name).

use std::sync::{Arc, LazyLock};

use kube_retention_common::field_error::FieldError;
use kube_retention_common::policies::{PolicyKey, Rules, RulesSource};
use tokio::sync::mpsc;

use super::work::{Progress, Work, WorkKey};

/// The lane ClusterRetentionPolicies are compiled in.
pub static CLUSTER_LANE: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

/// A policy compiled, or asked for again (the backlog let go of it to stay within its memory
/// bound): `read` is `None` then.
#[derive(Debug)]
pub struct Compiled {
    pub key: PolicyKey,
    pub seq: u64,
    pub read: Option<(Rules, Vec<FieldError>)>,
}

/// One policy's compilation: its source until the step, its rules after.
pub struct PolicyCompile {
    lane: Arc<str>,
    key: PolicyKey,
    seq: u64,
    source: Option<RulesSource>,
    bytes: usize,
    read: Option<(Rules, Vec<FieldError>)>,
    results: mpsc::UnboundedSender<Compiled>,
    returning: bool,
}

impl PolicyCompile {
    /// `key`'s rules from `source`, the `seq`-th compilation asked for; the result goes to
    /// `results`.
    pub fn new(
        key: PolicyKey,
        seq: u64,
        source: RulesSource,
        results: mpsc::UnboundedSender<Compiled>,
    ) -> Self {
        Self {
            lane: lane_of(&key),
            bytes: source.bytes(),
            key,
            seq,
            source: Some(source),
            read: None,
            results,
            returning: false,
        }
    }

    /// Marks it as work coming back from being shed: first in its lane.
    pub fn returning(mut self, returning: bool) -> Self {
        self.returning = returning;
        self
    }
}

/// The lane `key`'s compilation is charged to: its namespace, or [`CLUSTER_LANE`].
fn lane_of(key: &PolicyKey) -> Arc<str> {
    key.namespace
        .as_deref()
        .map_or_else(|| CLUSTER_LANE.clone(), Arc::from)
}

impl Work for PolicyCompile {
    fn namespace(&self) -> &Arc<str> {
        &self.lane
    }

    fn key(&self) -> WorkKey {
        WorkKey::Policy(Arc::from(self.key.name.as_str()))
    }

    fn step(&mut self) -> Progress {
        if let Some(source) = self.source.take() {
            self.read = Some(source.read());
        }
        Progress::Done
    }

    fn weight(&self) -> usize {
        self.bytes
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(self: Box<Self>) {
        let Self {
            key,
            seq,
            read,
            results,
            ..
        } = *self;
        results.send(Compiled { key, seq, read }).ok();
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        Box::new(Self {
            source: None,
            bytes: 0,
            read: None,
            ..*self
        })
    }
}
