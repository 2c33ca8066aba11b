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

use super::sandbox::Sandbox;
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

/// What a [`Compilation`] compiles in its one step: a policy's rules, a Cleaner's spec.
pub trait Compile: Send + 'static {
    type Output: Send + 'static;

    /// Its size, for the backlog's memory bound.
    fn bytes(&self) -> usize;

    fn compile(self) -> Self::Output;
}

/// Where a compilation's output goes: `None` when it was shed, to be asked for again.
pub type Deliver<O> = Box<dyn FnOnce(Option<O>) + Send>;

/// One compilation on the evaluator, charged to its lane: its source until the step, its output
/// after, delivered when it finishes. Policies' and Cleaners' are the same work.
pub struct Compilation<C: Compile> {
    lane: Arc<str>,
    key: WorkKey,
    source: Option<C>,
    bytes: usize,
    output: Option<C::Output>,
    deliver: Deliver<C::Output>,
    returning: bool,
}

impl<C: Compile> Compilation<C> {
    /// `source` compiled as work `key` of `lane`; the output goes to `deliver`.
    pub fn new(lane: Arc<str>, key: WorkKey, source: C, deliver: Deliver<C::Output>) -> Self {
        Self {
            lane,
            key,
            bytes: source.bytes(),
            source: Some(source),
            output: None,
            deliver,
            returning: false,
        }
    }

    /// Marks it as work coming back from being shed: first in its lane.
    pub fn returning(mut self, returning: bool) -> Self {
        self.returning = returning;
        self
    }
}

/// One policy's compilation: its source until the step, its rules after.
pub type PolicyCompile = Compilation<RulesSource>;

impl Compile for RulesSource {
    type Output = (Rules, Vec<FieldError>);

    fn bytes(&self) -> usize {
        RulesSource::bytes(self)
    }

    fn compile(self) -> Self::Output {
        self.read()
    }
}

impl PolicyCompile {
    /// `key`'s rules from `source`, the `seq`-th compilation asked for; the result goes to
    /// `results`.
    pub fn policy(
        key: PolicyKey,
        seq: u64,
        source: RulesSource,
        results: mpsc::UnboundedSender<Compiled>,
    ) -> Self {
        let (lane, work) = (lane_of(&key), WorkKey::Policy(Arc::from(key.name.as_str())));
        let deliver = move |read| {
            results.send(Compiled { key, seq, read }).ok();
        };
        Self::new(lane, work, source, Box::new(deliver))
    }
}

/// The lane `key`'s compilation is charged to: its namespace, or [`CLUSTER_LANE`].
fn lane_of(key: &PolicyKey) -> Arc<str> {
    key.namespace
        .as_deref()
        .map_or_else(|| CLUSTER_LANE.clone(), Arc::from)
}

impl<C: Compile> Work for Compilation<C> {
    fn namespace(&self) -> &Arc<str> {
        &self.lane
    }

    fn key(&self) -> WorkKey {
        self.key.clone()
    }

    fn step(&mut self, _: &mut Sandbox) -> Progress {
        if let Some(source) = self.source.take() {
            self.output = Some(source.compile());
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
        (self.deliver)(self.output);
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        Box::new(Self {
            source: None,
            bytes: 0,
            output: None,
            ..*self
        })
    }
}
