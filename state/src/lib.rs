//! The controller's memory and decisions. Pure: it is fed watch events, outcomes of its requests
//! and the clock, and answers with the [`Action`]s to take. Every rule comes from `common`.
//!
//! [`State`] owns parts that each own one concern, with their own types: the deletion engine
//! (`tracker`: the records of runs and their queue in `runs`, their bound shared by the namespaces
//! in `room`, the groups that share limits in `groups`), the policies and what they report
//! (`policies`, `evaluation`), the blast-radius guards (`guard`), and the objects the webhook never
//! labelled (`stragglers`). No part takes another's data to change it: the tracker reports the
//! deletions that are due, and the state's gate (`gate`) decides each — held by a guard, reported
//! by a dry run, or sent — while the policy book is only read; what a part learns for another is
//! handed back to the state, which tells the other. Here is only what an input means across them:
//! an object seen or gone, a list begun or ended, a policy changed, a write failed.

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::kinds::{Entry, KindId, Registry, RegistryError, Role};
use kube_retention_common::model::object_value;
use serde_json::Value;

mod action;
mod compact;
mod counts;
mod evaluation;
mod failures;
mod gate;
mod governing;
mod groups;
mod guard;
mod keys;
mod ledger;
mod lists;
mod loaded;
mod notice;
mod policies;
mod policy_changes;
mod record;
mod recording;
mod room;
mod runs;
mod seen;
mod steps;
mod stragglers;
mod tracker;

pub use action::{Action, EventTarget, Governance, Ledgered, Reason, Warning};
pub use counts::Gauges;
pub use evaluation::{ExceededReport, Overran, PolicyAnswers, Unevaluated, answers_current};
pub use failures::{FIRST_RETRY, Failure, MAX_RETRY, retry_delay};
pub use guard::{GuardReport, HELD_SHOWN, Standing};
pub use keys::ObjectKey;
pub use policies::{Approval, LoadedPolicy, PolicyBook, PolicyKey, Summary, WOULD_DELETE_SHOWN};
pub use recording::Stamping;
pub use room::{DEFAULT_MAX_TRACKED, RECORD_BYTES};
pub use stragglers::{Labelling, Stragglers};

use groups::Enforce;
use guard::Guards;
use keys::{GroupKey, Namespaces};
use lists::Lists;
use recording::changed_for_limits;
use room::Admit;
use runs::Write;
use seen::Seen;
use tracker::Tracker;

#[derive(Default)]
pub struct State {
    kinds: Registry,
    stamping: Stamping,
    namespaces: Namespaces,
    tracker: Tracker,
    policies: PolicyBook,
    /// The blast-radius guards, the gate's part that may hold a due deletion (`gate.rs`).
    guards: Guards,
    stragglers: Stragglers,
    lists: Lists,
}

impl State {
    pub fn new(kinds: Registry) -> Self {
        Self {
            kinds,
            ..Self::default()
        }
    }

    /// Policies that set no `spec.safety.maxImmediateDeletions` hold a new generation's
    /// deletions for approval beyond `threshold` (0: no guard, the default here).
    pub fn with_max_immediate_deletions(mut self, threshold: u32) -> Self {
        self.guards.default_threshold = threshold;
        self
    }

    /// No more than `max` runs tracked at once (`--max-tracked-objects`), the namespace holding
    /// the most going without at the bound (`room.rs`).
    pub fn with_max_tracked(mut self, max: usize) -> Self {
        self.tracker.runs = runs::Runs::with_max(max);
        self
    }

    /// Which stamps to write (`--stamp`; [`Stamping::Never`] by default).
    pub fn with_stamping(mut self, stamping: Stamping) -> Self {
        self.stamping = stamping;
        self
    }

    /// Every deletion goes to the deletion ledger (`--ledger-sink`), not only those of policies
    /// with a `spec.sink`: each record keeps the setting that decided it, for the ledger to say.
    pub fn with_ledger(mut self, ledger: bool) -> Self {
        self.tracker.ledger = ledger;
        self
    }

    pub fn kinds(&self) -> &Registry {
        &self.kinds
    }

    pub fn policies(&self) -> &PolicyBook {
        &self.policies
    }

    /// Leadership changed: a new leader gets all a follower held back, labels included.
    pub fn set_leader(&mut self, leader: bool, now: Timestamp) -> Vec<Action> {
        let was = self.tracker.leads();
        let steps = self
            .tracker
            .set_leader(&self.kinds, &self.policies, leader, now);
        let mut actions = self.gated(steps);
        if !leader {
            self.stragglers.forget_requests();
        } else if !was {
            actions.extend(self.stragglers.label_all(now));
        }
        actions
    }

    /// When [`State::due`] next has something to do (never, for a follower).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.tracker.next_deadline()
    }

    /// Deletions that are due at `now`, overdue first, and stamps whose backoff ended.
    pub fn due(&mut self, now: Timestamp) -> Vec<Action> {
        let steps = self.tracker.due(&self.kinds, &self.policies, now);
        self.gated(steps)
    }

    /// An object of `kind` was added or changed, where no policy has expressions to evaluate.
    pub fn applied(&mut self, kind: KindId, object: &DynamicObject, now: Timestamp) -> Vec<Action> {
        match object_value(&self.kinds[kind].resource, object) {
            Some(value) => self.judged(kind, object, &value, None, now),
            None => Vec::new(),
        }
    }

    /// An object of `kind` was added or changed, as the model reads it, with its `answers`.
    pub fn judged(
        &mut self,
        kind: KindId,
        object: &DynamicObject,
        value: &Value,
        answers: Option<&PolicyAnswers>,
        now: Timestamp,
    ) -> Vec<Action> {
        let (Some(name), Some(namespace)) = (
            object.metadata.name.as_deref(),
            object.metadata.namespace.as_deref(),
        ) else {
            return Vec::new();
        };
        let key = self.namespaces.key(kind, namespace, name);
        if self.kinds[kind].role != Role::Parent && !self.room_for(&key) {
            return Vec::new();
        }
        self.policies.note_answers(&key, answers);
        let seen = Seen {
            kind,
            namespace: key.namespace.clone(),
            name,
            object,
            value,
            answers,
        };
        match self.kinds[kind].role {
            Role::Parent => {
                let parent = (seen.namespace.clone(), seen.name.into());
                self.lists.parent_listed(kind, parent);
                let steps = self.tracker.parent_seen(&self.kinds, &seen, now);
                self.gated(steps)
            }
            Role::Run { .. } | Role::Object => self.run_applied(key, &seen, now),
        }
    }

    fn run_applied(&mut self, key: ObjectKey, seen: &Seen<'_>, now: Timestamp) -> Vec<Action> {
        let entry = &self.kinds[seen.kind];
        let governed = governing::govern(&self.policies, entry, seen, seen.created(), now);
        let limits_changed = governed.group.as_ref().is_some_and(|(name, limits)| {
            let group = GroupKey::of(&key, name.clone());
            self.tracker.groups.set_limits(group, *limits, None)
        });
        self.policies
            .set_overruled(&key, governed.overruled.clone());
        let previous = self.tracker.untrack(&key);
        let (record, future_finish) = recording::record_of(
            seen,
            entry,
            &governed,
            previous.as_deref(),
            self.stamping,
            self.tracker.ledger,
            now,
        );
        let mut actions: Vec<Action> = future_finish
            .map(|at| recording::skew_warning(&self.kinds, &key, &record, at, now))
            .into_iter()
            .collect();
        let changed = limits_changed || changed_for_limits(previous.as_deref(), &record);
        let enforce = Enforce::after(changed, self.lists.under_way(key.kind));
        let steps = self.tracker.track(&self.kinds, key, record, enforce, now);
        actions.extend(self.gated(steps));
        actions
    }

    /// Whether the run `key` may be tracked: it is already, or there is room, or a run of the
    /// namespace holding the most is let go of for it; else it is left out (`room.rs`).
    fn room_for(&mut self, key: &ObjectKey) -> bool {
        if self.tracker.runs.get(key).is_some() {
            return true;
        }
        match self.tracker.runs.room().admit(&key.namespace) {
            Admit::Keep => true,
            Admit::InPlaceOf(heaviest) => {
                let Some(other) = self.tracker.runs.one_to_let_go(&heaviest) else {
                    return false;
                };
                self.forget_run(&other);
                let room = self.tracker.runs.room_mut();
                room.left_out(other.kind, other.namespace);
                true
            }
            Admit::LeaveOut => {
                let room = self.tracker.runs.room_mut();
                room.left_out(key.kind, key.namespace.clone());
                false
            }
        }
    }

    /// The kinds, in namespaces, whose runs were left out for room, to list again now that
    /// there is room for them; each answered once (`room.rs`).
    pub fn left_out_to_list(&mut self) -> Vec<(KindId, std::sync::Arc<str>)> {
        self.tracker.runs.room_mut().left_out_to_list()
    }

    /// An object of `kind` is gone.
    pub fn removed(&mut self, kind: KindId, namespace: &str, name: &str) {
        if self.kinds[kind].role == Role::Parent {
            let groups = &mut self.tracker.groups;
            groups.parent_gone(&self.kinds, kind, namespace, name);
        } else {
            let key = self.namespaces.key(kind, namespace, name);
            self.forget_run(&key);
        }
    }

    /// The run `key` is gone: from its group, the guards' counts and its policy's reports.
    fn forget_run(&mut self, key: &ObjectKey) {
        let record = self.tracker.untrack(key);
        self.guards.forget_object(key);
        let policy = record.as_ref().and_then(|record| record.policy.as_ref());
        self.policies.forget_object(key, policy);
    }

    /// A kind to track from now on (found by discovery, or a policy's).
    pub fn add_kind(&mut self, entry: Entry) -> Result<KindId, RegistryError> {
        self.kinds.add(entry)
    }

    /// A kind no longer watched: its records go (its entry stays, so its id stays valid).
    pub fn forget_kind(&mut self, kind: KindId) {
        self.stragglers.forget_kind(kind);
        self.lists.ended(kind);
        for key in self.tracker.runs.keys_of(kind) {
            self.forget_run(&key);
        }
        self.tracker.groups.forget_kind(kind);
    }

    /// A DELETE did not happen.
    pub fn delete_failed(
        &mut self,
        key: &ObjectKey,
        fault: Failure,
        now: Timestamp,
    ) -> Vec<Action> {
        let runs = &mut self.tracker.runs;
        Vec::from_iter(runs.write_failed(&self.kinds, key, Write::Delete, fault, now))
    }

    /// A stamp did not happen.
    pub fn stamp_failed(&mut self, key: &ObjectKey, fault: Failure, now: Timestamp) -> Vec<Action> {
        let runs = &mut self.tracker.runs;
        Vec::from_iter(runs.write_failed(&self.kinds, key, Write::Stamp, fault, now))
    }

    /// The metadata watch's events and label requests (see [`Labelling`]).
    pub fn labelling(&mut self) -> Labelling<'_> {
        Labelling::of(self)
    }

    /// Every gauge, in one pass over the records.
    pub fn gauges(&self, now: Timestamp) -> Gauges {
        Gauges::of(self, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Job of `namespace` that finished on New Year's Day, to be deleted an hour later.
    fn finished_job(namespace: &str, name: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "uid": format!("{namespace}-{name}"),
                         "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"retention.dev/ttl-after-finished": "1h"}},
            "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
        }))
        .unwrap()
    }

    /// Two namespaces tie at the top of a full room and take turns at being the heaviest as a
    /// third's runs take their places: one pass over the records finds runs of both.
    #[test]
    fn room_is_made_with_a_pass_over_the_records_per_batch_while_namespaces_tie() {
        let kinds = Registry::builtin().clone();
        let job = kinds.named("Job.batch").unwrap();
        let mut state = State::new(kinds).with_max_tracked(2000);
        let now = "2026-01-01T00:00:02Z".parse().unwrap();
        for index in 0..1000 {
            state.applied(job, &finished_job("a", &format!("a{index}")), now);
            state.applied(job, &finished_job("b", &format!("b{index}")), now);
        }
        for index in 0..600 {
            state.applied(job, &finished_job("c", &format!("c{index}")), now);
        }
        let room = state.tracker.runs.room();
        assert_eq!((room.of("a"), room.of("b"), room.of("c")), (700, 700, 600));
        assert_eq!(state.tracker.runs.let_go_passes, 1);
    }
}
