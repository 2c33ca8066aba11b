//! Objects whose policies have expressions, in the loop: each version goes to the
//! [`Evaluator`] and is judged when its answers come back — unless a newer version (or its
//! deletion) came first, which drops them, or a policy changed meanwhile, which evaluates it
//! again. Objects no policy with expressions selects are judged at once, as before. An object
//! the evaluator shed to stay within its memory bound is fetched again at its turn (listed by
//! its name: one request, tried three times at most), and evaluated as if the watch had brought
//! it. An object is sent only once its charge of the budget of decoded objects covers the
//! model's JSON it will be made into too; where that has no room at once, it is sent shed, and
//! fetched again with room for both taken as it is read.
//!
//! The blast-radius guard counts a kind once its objects listed are judged. It waits for the
//! objects whose evaluation was under way when the list ended, each until its first answer comes
//! back (superseded or not) or it goes, and only in the namespaces a policy governs: a tenant
//! that edits its objects faster than the evaluator answers them always has evaluations under
//! way, and must not hold up another tenant's count by it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use kube::Client;
use kube::api::DynamicObject;
use kube_retention_common::kinds::KindId;
use tokio::sync::mpsc;

use super::Core;
use super::compiles::Compiles;
use super::refetch::{Fetched, Refetch, Refetched};
use crate::metrics::{KindLabels, Metrics};
use kube_retention_evaluator::{Evaluated, Evaluator, Job, PolicyOutcome, PolicyWork, value_bytes};
use kube_retention_io::lean;
use kube_retention_io::watch_set::Room;
use kube_retention_runtime::object_memory::Charge;
use kube_retention_state::{Action, ObjectKey, answers_current};

/// The evaluations under way, by object: the latest version's sequence number; and, by kind,
/// the objects under way when its last list ended, whose answers the guard awaits.
pub struct Evaluations {
    pub(super) evaluator: Evaluator,
    pub(super) sender: mpsc::UnboundedSender<PolicyOutcome>,
    pub(super) results: mpsc::UnboundedReceiver<PolicyOutcome>,
    /// Shed objects fetched again at their turn.
    pub(super) refetch: Refetch,
    pending: HashMap<ObjectKey, u64>,
    awaited: HashMap<KindId, HashSet<ObjectKey>>,
    next: u64,
    /// The shed object fetched again being submitted now: it comes back to the evaluator.
    pub(super) returning: Option<ObjectKey>,
    /// Policies' generations being compiled on the same evaluator.
    pub(super) compiles: Compiles,
}

impl Evaluations {
    /// Evaluations on `evaluator`'s thread; objects it sheds are fetched again with `client`,
    /// decoded within `room` (the watches').
    pub fn new(evaluator: Evaluator, client: Client, room: Room) -> Self {
        let (sender, results) = mpsc::unbounded_channel();
        Self {
            compiles: Compiles::new(evaluator.clone()),
            evaluator,
            refetch: Refetch::new(client, room, sender.clone()),
            sender,
            results,
            pending: HashMap::new(),
            awaited: HashMap::new(),
            next: 0,
            returning: None,
        }
    }

    /// Sends `job` to the evaluator, charged for the model's JSON it will be made into first:
    /// where the budget of decoded objects has no room for that now (or a read waits for room),
    /// it is sent shed, to be fetched again at its turn with room for both taken as it is read.
    /// Work coming back was charged for both as it was fetched.
    fn submit(&mut self, mut job: Job, metrics: &Metrics) {
        self.next += 1;
        job.seq = self.next;
        self.pending.insert(job.key.clone(), job.seq);
        metrics.evaluations_queued.set(gauge(self.pending.len()));
        let returning = self.returning.take_if(|key| key == &job.key).is_some();
        let room = returning || job.charge.try_grow(value_bytes(job.charge.bytes()));
        let work = Box::new(PolicyWork::new(job, self.sender.clone()).returning(returning));
        let sent = match room {
            true => self.evaluator.submit(work),
            false => self.evaluator.shed(work),
        };
        if !sent {
            tracing::error!(
                "the CEL evaluator's thread has ended; policies with expressions no longer apply"
            );
        }
    }

    /// Whether `seq` is the latest version of `key` submitted.
    pub(super) fn latest(&self, key: &ObjectKey, seq: u64) -> bool {
        self.pending.get(key) == Some(&seq)
    }

    /// `key` changed or went otherwise: whatever is under way for it no longer counts. Answers
    /// whether the guard was awaiting it.
    pub(super) fn forget(&mut self, key: &ObjectKey) -> bool {
        self.pending.remove(key);
        self.answered(key)
    }

    /// The list of `kind` ended: the guard awaits the objects of it under way now.
    pub(super) fn list_done(&mut self, kind: KindId) {
        let under_way = self.pending.keys().filter(|key| key.kind == kind);
        self.awaited.insert(kind, under_way.cloned().collect());
    }

    /// The list of `kind` in `namespace` ended: the guard awaits its objects there under way
    /// now, besides those it awaited.
    pub(super) fn list_done_in(&mut self, kind: KindId, namespace: &str) {
        let under_way = self
            .pending
            .keys()
            .filter(|key| key.kind == kind && &*key.namespace == namespace);
        self.awaited
            .entry(kind)
            .or_default()
            .extend(under_way.cloned());
    }

    /// An answer for `key` came back (or it went): the guard no longer awaits it. Answers
    /// whether it did.
    pub(super) fn answered(&mut self, key: &ObjectKey) -> bool {
        self.awaited
            .get_mut(&key.kind)
            .is_some_and(|awaited| awaited.remove(key))
    }

    /// The namespaces with objects of `kind` whose answers the guard awaits.
    pub(super) fn unsettled(&self, kind: KindId) -> HashSet<Arc<str>> {
        let awaited = self.awaited.get(&kind).into_iter().flatten();
        awaited.map(|key| key.namespace.clone()).collect()
    }

    /// An object was added or changed: judged at once, or once its expressions are evaluated
    /// (with it, what it is charged of the budget of decoded objects, `charge`).
    pub(super) fn on_applied(
        &mut self,
        core: &mut Core,
        kind: KindId,
        object: DynamicObject,
        charge: Charge,
        now: Timestamp,
    ) -> Vec<Action> {
        let Some(key) = key_of(kind, &object) else {
            return Vec::new();
        };
        if lean::past_bound(&object) {
            return self.on_past_bound(core, key);
        }
        let policies = core.state.unevaluated(kind, &object);
        if policies.is_empty() {
            let awaited = self.forget(&key);
            let mut actions = core.state.applied(kind, &object, now);
            if awaited {
                actions.extend(self.settle(core, kind));
            }
            return actions;
        }
        core.state.listed(kind, &key.namespace, &key.name);
        let job = Job {
            seq: 0,
            key,
            resource: core.state.kinds()[kind].resource.clone(),
            object,
            policies,
            charge,
        };
        self.submit(job, &core.metrics);
        Vec::new()
    }

    /// An object whose data held more than the controller decodes of one
    /// ([`lean::OBJECT_BYTES`]): nothing of it can be judged, so it leaves the state as if gone,
    /// its waiting evaluation with it, and is not deleted until a version of it fits.
    fn on_past_bound(&mut self, core: &mut Core, key: ObjectKey) -> Vec<Action> {
        let resource = &core.state.kinds()[key.kind].resource;
        tracing::debug!(namespace = %key.namespace, name = %key.name, kind = %resource.kind, bound = lean::OBJECT_BYTES, "an object held more than the controller decodes of one: not judged");
        let labels = KindLabels {
            kind: resource.to_string(),
        };
        core.metrics.objects_past_bound.get_or_create(&labels).inc();
        let awaited = self.forget(&key);
        core.state.removed(key.kind, &key.namespace, &key.name);
        match awaited {
            true => self.settle(core, key.kind),
            false => Vec::new(),
        }
    }

    /// What the evaluator sent back for an object: its answers, or word that it was shed.
    pub(super) fn on_outcome(&mut self, core: &mut Core, outcome: PolicyOutcome) -> Vec<Action> {
        match outcome {
            PolicyOutcome::Evaluated(evaluated) => self.on_evaluated(core, *evaluated),
            PolicyOutcome::Shed { key, seq } => {
                self.fetch_again(core, key, seq);
                Vec::new()
            }
        }
    }

    /// Fetches the object `key` stood for in the version `seq`, if that is still its latest:
    /// the evaluator let it go, and its turn has come.
    fn fetch_again(&self, core: &Core, key: ObjectKey, seq: u64) {
        if !self.latest(&key, seq) || !core.watches.is_running(key.kind) {
            self.evaluator.nothing_returned();
            return;
        }
        let resource = core.state.kinds()[key.kind].resource.api_resource();
        self.refetch.fetch(key, seq, &resource);
    }

    /// An object fetched again: evaluated as if its watch had brought it, if nothing newer did
    /// meanwhile. Gone, or not fetched, it waits for its watch's next word of it.
    pub(super) fn on_fetched(&mut self, core: &mut Core, fetched: Fetched) -> Vec<Action> {
        if !self.latest(&fetched.key, fetched.seq) {
            self.evaluator.nothing_returned();
            return Vec::new();
        }
        let key = fetched.key.clone();
        let kind = core.state.kinds()[key.kind].resource.to_string();
        match self.refetch.fetched(fetched, kind, &core.metrics) {
            Refetched::Object(object, charge) => {
                self.returning = Some(key.clone());
                let actions = self.on_applied(core, key.kind, *object, charge, core.clock.now());
                if self.returning.take().is_some() {
                    // Judged without its expressions (no policy with any selects it now).
                    self.evaluator.nothing_returned();
                }
                actions
            }
            Refetched::Given(key) => {
                self.evaluator.nothing_returned();
                match self.forget(&key) {
                    true => self.settle(core, key.kind),
                    false => Vec::new(),
                }
            }
            Refetched::Retrying => Vec::new(),
        }
    }

    /// An object's answers came back: judged with them if they are still its latest and its
    /// policies unchanged. The last the guard awaited in a namespace lets the blast-radius
    /// guards counting the kind there decide.
    fn on_evaluated(&mut self, core: &mut Core, evaluated: Evaluated) -> Vec<Action> {
        let kind = evaluated.job.key.kind;
        let awaited = self.answered(&evaluated.job.key);
        let mut actions = self.judge_evaluated(core, evaluated);
        if awaited {
            actions.extend(self.settle(core, kind));
        }
        actions
    }

    /// The blast-radius guards counting `kind` decide where the objects they govern are judged.
    pub(super) fn settle(&mut self, core: &mut Core, kind: KindId) -> Vec<Action> {
        let unsettled = self.unsettled(kind);
        core.state.settled(kind, core.clock.now(), &unsettled)
    }

    fn judge_evaluated(&mut self, core: &mut Core, evaluated: Evaluated) -> Vec<Action> {
        let Evaluated {
            job,
            value,
            answers,
            took,
        } = evaluated;
        core.metrics.evaluation_seconds.observe(took.as_secs_f64());
        if !self.latest(&job.key, job.seq) {
            return Vec::new();
        }
        self.forget(&job.key);
        let queued = gauge(self.pending.len());
        core.metrics.evaluations_queued.set(queued);
        if !core.watches.is_running(job.key.kind) {
            return Vec::new();
        }
        for exceeded in answers.values().flat_map(|answers| answers.exceeded()) {
            tracing::warn!(namespace = %job.key.namespace, name = %job.key.name, field = exceeded.0, error = %exceeded.1, "a policy's expression went past its limit; the object is treated as not matching");
            core.metrics.cel_limit_exceeded.inc();
        }
        let now = core.clock.now();
        let current = core.state.unevaluated(job.key.kind, &job.object);
        if current.is_empty() {
            return core.state.applied(job.key.kind, &job.object, now);
        }
        if !answers_current(&current, &job.policies) {
            return self.on_applied(core, job.key.kind, job.object, job.charge, now);
        }
        let Some(value) = value else {
            return Vec::new();
        };
        core.state
            .judged(job.key.kind, &job.object, &value, Some(&answers), now)
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The key of an object of `kind`, where it has a namespace and a name.
pub(super) fn key_of(kind: KindId, object: &DynamicObject) -> Option<ObjectKey> {
    Some(ObjectKey {
        kind,
        namespace: Arc::from(object.metadata.namespace.as_deref()?),
        name: object.metadata.name.as_deref()?.into(),
    })
}
