//! The controller's memory and decisions: a compact record per tracked run (never the whole
//! object), the limits each parent sets, a queue of deadlines and retries, and the objects the
//! webhook never labelled. Pure: it is fed watch events, outcomes of its requests and the clock,
//! and answers with the [`Action`]s to take. Every rule comes from `common`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::Value;

use kube_retention_common::kinds::{KindId, Registry, Resource, Role};

mod action;
mod compact;
mod counts;
mod due;
mod evaluation;
mod failures;
mod limits;
mod policies;
mod record;
mod relist;
mod runs;
mod stragglers;

pub use action::{Action, EventTarget, Governance, Reason, Warning};
use compact::CompactTime;
pub use counts::Gauges;
pub use evaluation::{PolicyAnswers, Unevaluated};
pub use failures::{FIRST_RETRY, Failure, MAX_RETRY, retry_delay};
pub use policies::{LoadedPolicy, PolicyKey, Summary, WOULD_DELETE_SHOWN};
use record::{Record, Stamps, Uid};

/// An object of `resource` as the model reads it: JSON with its apiVersion and kind (list items
/// of built-in kinds carry neither).
pub fn model_value(resource: &Resource, object: &DynamicObject) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(resource.api_version()));
        map.insert("kind".into(), Value::String(resource.kind.clone()));
    }
    Some(value)
}

/// Identifies a tracked object: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: KindId,
    pub namespace: Arc<str>,
    pub name: CompactString,
}

/// A group of runs that share limits: runs of `kind` in `namespace` under parent `parent`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    kind: KindId,
    namespace: Arc<str>,
    parent: CompactString,
}

/// Namespace and name of an object seen during a relist.
type NamespacedName = (Arc<str>, CompactString);

/// An object as a watch delivered it, with its JSON form for the model.
struct Seen<'a> {
    kind: KindId,
    namespace: Arc<str>,
    name: &'a str,
    object: &'a DynamicObject,
    value: &'a Value,
    /// Its policies' expressions, evaluated ahead (off the loop); `None` where none has any.
    answers: Option<&'a PolicyAnswers>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Limits {
    succeeded: Option<u32>,
    failed: Option<u32>,
}

#[derive(Default)]
pub struct State {
    kinds: Registry,
    /// Boxed, so the table's slots stay small: a table grows by doubling and holds both its
    /// old and new slots while it does, which at 100,000 records was the listing's peak.
    runs: HashMap<ObjectKey, Box<Record>>,
    limits: HashMap<GroupKey, Limits>,
    parent_uids: HashMap<GroupKey, CompactString>,
    groups: HashMap<GroupKey, HashSet<CompactString>>,
    queue: BTreeSet<(CompactTime, ObjectKey)>,
    namespaces: HashSet<Arc<str>>,
    /// Kinds being listed afresh, with the parents listed so far for parent kinds. Runs' records
    /// carry a `listed` mark instead: a set of 100,000 names would cost megabytes at the peak.
    relisting: HashMap<KindId, HashSet<NamespacedName>>,
    /// Groups whose limits wait for the end of their kind's list.
    deferred: HashSet<GroupKey>,
    stragglers: HashMap<ObjectKey, stragglers::Straggler>,
    policies: BTreeMap<Arc<PolicyKey>, LoadedPolicy>,
    namespace_labels: HashMap<Arc<str>, BTreeMap<String, String>>,
    would_delete: HashMap<Arc<PolicyKey>, BTreeMap<ObjectKey, (Timestamp, Reason)>>,
    /// Per policy, the objects on which its expressions went past a limit, and how.
    exceeded: HashMap<Arc<PolicyKey>, BTreeMap<ObjectKey, String>>,
    deletions: HashMap<PolicyKey, u64>,
    /// Objects two or more policies of a scope applied to: those that lost.
    contested: HashMap<ObjectKey, Vec<Arc<PolicyKey>>>,
    /// Only the leader acts; a follower keeps its records warm and acts once it leads.
    leader: bool,
}

impl State {
    pub fn new(kinds: Registry) -> Self {
        Self {
            kinds,
            ..Self::default()
        }
    }

    /// Leadership changed. A new leader gets every action a follower held back: stamps,
    /// labels, limits and due deletions.
    pub fn set_leader(&mut self, leader: bool, now: Timestamp) -> Vec<Action> {
        let was = std::mem::replace(&mut self.leader, leader);
        if !leader {
            for record in self.runs.values_mut() {
                record.pending = false;
                record.forget_stamp_request();
            }
            self.forget_label_requests();
            return Vec::new();
        }
        if was {
            return Vec::new();
        }
        let mut actions: Vec<Action> = self
            .runs
            .iter_mut()
            .filter_map(|(key, record)| record.stamp_action(key, now))
            .collect();
        actions.extend(self.label_stragglers(now));
        let groups: Vec<GroupKey> = self.groups.keys().cloned().collect();
        for group in groups {
            actions.extend(self.enforce_limits(&group, now));
        }
        actions.extend(self.due(now));
        actions
    }

    pub fn kinds(&self) -> &Registry {
        &self.kinds
    }

    /// When [`State::due`] next has something to do (never, for a follower).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.queue
            .first()
            .map(|(at, _)| at.get())
            .filter(|_| self.leader)
    }

    /// Puts `key`'s record in the queue at the time it next needs attention, if any.
    fn reschedule(&mut self, key: &ObjectKey) {
        let Some(record) = self.runs.get_mut(key) else {
            return;
        };
        if let Some(at) = record.queued.take() {
            self.queue.remove(&(at, key.clone()));
        }
        if let Some(at) = record.wake_at(None) {
            record.queued = Some(at);
            self.queue.insert((at, key.clone()));
        }
    }

    fn intern(&mut self, namespace: &str) -> Arc<str> {
        if let Some(interned) = self.namespaces.get(namespace) {
            return interned.clone();
        }
        let interned: Arc<str> = Arc::from(namespace);
        self.namespaces.insert(interned.clone());
        interned
    }

    /// An object of `kind` was added or changed. Its policies' expressions are evaluated here:
    /// the loop calls this only where none has any ([`State::unevaluated`]).
    pub fn applied(&mut self, kind: KindId, object: &DynamicObject, now: Timestamp) -> Vec<Action> {
        match self.model_value(kind, object) {
            Some(value) => self.judged(kind, object, &value, None, now),
            None => Vec::new(),
        }
    }

    /// The object as the model reads it: JSON with its apiVersion and kind.
    pub fn model_value(&self, kind: KindId, object: &DynamicObject) -> Option<Value> {
        model_value(&self.kinds[kind].resource, object)
    }

    /// An object of `kind` was added or changed, as the model reads it (`value`), with its
    /// policies' `answers` where they were evaluated ahead.
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
        let namespace = self.intern(namespace);
        if self.kinds[kind].role == Role::Parent
            && let Some(seen) = self.relisting.get_mut(&kind)
        {
            seen.insert((namespace.clone(), name.into()));
        }
        if answers.is_some() || !self.exceeded.is_empty() {
            let key = ObjectKey {
                kind,
                namespace: namespace.clone(),
                name: name.into(),
            };
            self.note_exceeded(&key, answers);
        }
        let seen = Seen {
            kind,
            namespace,
            name,
            object,
            value,
            answers,
        };
        match self.kinds[kind].role {
            Role::Parent => self.parent_applied(&seen, now),
            Role::Run { .. } | Role::Object => self.run_applied(&seen, now),
        }
    }

    /// An object of `kind` is gone.
    pub fn removed(&mut self, kind: KindId, namespace: &str, name: &str) {
        let namespace = self.intern(namespace);
        if self.kinds[kind].role == Role::Parent {
            let groups: Vec<GroupKey> = self
                .limits
                .keys()
                .filter(|group| {
                    self.parent_kind(group.kind) == Some(kind)
                        && group.namespace == namespace
                        && &*group.parent == name
                })
                .cloned()
                .collect();
            for group in groups {
                self.limits.remove(&group);
                self.parent_uids.remove(&group);
            }
            return;
        }
        let key = ObjectKey {
            kind,
            namespace: namespace.clone(),
            name: name.into(),
        };
        self.contested.remove(&key);
        self.note_exceeded(&key, None);
        if let Some(record) = self.runs.remove(&key) {
            if let Some(at) = record.queued {
                self.queue.remove(&(at, key.clone()));
            }
            if let Some(policy) = &record.policy
                && let Some(report) = self.would_delete.get_mut(policy)
            {
                report.remove(&key);
            }
            if let Some(parent) = record.group {
                self.leave_group(kind, &namespace, &parent, name);
            }
        }
    }
}
