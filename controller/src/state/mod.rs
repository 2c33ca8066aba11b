//! The controller's memory and decisions: a compact record per tracked run (never the whole
//! object), the limits each parent sets, and a deadline queue. Pure: it is fed watch events and
//! the clock, and answers with the [`Action`]s to take. Every rule comes from `common`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::Outcome;
use kube_retention_common::expiry::format_timestamp;
use serde_json::Value;

use crate::kinds::{Grouping, Role, WatchedKind};

mod limits;
mod runs;

/// Identifies a tracked object: its kind (index into the watched kinds), namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: usize,
    pub namespace: Arc<str>,
    pub name: CompactString,
}

/// A group of runs that share limits: runs of `kind` in `namespace` under parent `parent`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    kind: usize,
    namespace: Arc<str>,
    parent: CompactString,
}

/// Namespace and name of an object seen during a relist.
type NamespacedName = (Arc<str>, CompactString);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    Ttl,
    Limit,
}

/// Where a deletion's Event is recorded: the parent, else the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTarget {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `retention.dev/expires-at` (one merge patch).
    Stamp { key: Key, expires_at: String },
    /// Delete with uid and resourceVersion preconditions.
    Delete {
        key: Key,
        uid: CompactString,
        resource_version: CompactString,
        reason: Reason,
        /// When it became eligible (for the deletion-delay histogram).
        eligible_at: Timestamp,
        event_target: EventTarget,
    },
}

/// An object's uid: 16 bytes when it is the UUID the API server assigns (always, in practice),
/// its text otherwise, so the precondition always carries exactly what the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Uid {
    Uuid(uuid::Uuid),
    Other(CompactString),
}

impl Uid {
    fn new(text: &str) -> Self {
        match uuid::Uuid::try_parse(text) {
            Ok(parsed) if parsed.hyphenated().to_string() == text => Self::Uuid(parsed),
            _ => Self::Other(text.into()),
        }
    }

    fn text(&self) -> CompactString {
        match self {
            Self::Uuid(uuid) => CompactString::from(uuid.hyphenated().to_string()),
            Self::Other(text) => text.clone(),
        }
    }
}

#[derive(Debug)]
struct Record {
    uid: Uid,
    resource_version: CompactString,
    created: Timestamp,
    outcome: Option<Outcome>,
    deadline: Option<Timestamp>,
    keep: bool,
    deleting: bool,
    /// A DELETE is on its way; cleared by a newer version or a failed attempt.
    pending: bool,
    /// The expires-at value the object should carry but does not yet.
    needs_stamp: Option<Timestamp>,
    /// The expires-at value last asked for, so a stamp is requested once.
    stamp_requested: Option<Timestamp>,
    group: Option<CompactString>,
    owner: Option<Box<EventTarget>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Limits {
    succeeded: Option<u32>,
    failed: Option<u32>,
}

#[derive(Default)]
pub struct State {
    kinds: Vec<WatchedKind>,
    runs: HashMap<Key, Record>,
    limits: HashMap<GroupKey, Limits>,
    parent_uids: HashMap<GroupKey, CompactString>,
    groups: HashMap<GroupKey, HashSet<CompactString>>,
    queue: BTreeSet<(Timestamp, Key)>,
    namespaces: HashSet<Arc<str>>,
    relisting: HashMap<usize, HashSet<NamespacedName>>,
    /// Only the leader acts; a follower keeps its records warm and acts once it leads.
    leader: bool,
}

impl State {
    pub fn new(kinds: Vec<WatchedKind>) -> Self {
        Self {
            kinds,
            ..Self::default()
        }
    }

    /// Leadership changed. A new leader gets every action a follower held back: due deletions,
    /// limits, and stamps.
    pub fn set_leader(&mut self, leader: bool, now: Timestamp) -> Vec<Action> {
        let was = std::mem::replace(&mut self.leader, leader);
        if !leader || was {
            if !leader {
                for record in self.runs.values_mut() {
                    record.pending = false;
                    record.stamp_requested = None;
                }
            }
            return Vec::new();
        }
        let mut actions = Vec::new();
        for (key, record) in &mut self.runs {
            if let Some(at) = record.needs_stamp
                && record.stamp_requested != Some(at)
                && at > now
            {
                record.stamp_requested = Some(at);
                actions.push(Action::Stamp {
                    key: key.clone(),
                    expires_at: format_timestamp(at),
                });
            }
        }
        let groups: Vec<GroupKey> = self.groups.keys().cloned().collect();
        for group in groups {
            actions.extend(self.enforce_limits(&group, now));
        }
        actions.extend(self.due(now));
        actions
    }

    pub fn kinds(&self) -> &[WatchedKind] {
        &self.kinds
    }

    /// How many runs of `kind` are tracked.
    pub fn tracked(&self, kind: usize) -> usize {
        self.runs.keys().filter(|key| key.kind == kind).count()
    }

    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.queue.first().map(|(at, _)| *at)
    }

    fn intern(&mut self, namespace: &str) -> Arc<str> {
        if let Some(interned) = self.namespaces.get(namespace) {
            return interned.clone();
        }
        let interned: Arc<str> = Arc::from(namespace);
        self.namespaces.insert(interned.clone());
        interned
    }

    /// A (re)list of `kind` begins: objects not seen again by [`State::relist_done`] are gone.
    pub fn relist_started(&mut self, kind: usize) {
        self.relisting.insert(kind, HashSet::new());
    }

    pub fn relist_done(&mut self, kind: usize) {
        let Some(seen) = self.relisting.remove(&kind) else {
            return;
        };
        let known: Vec<NamespacedName> = if self.kinds[kind].role == Role::Parent {
            self.limits
                .keys()
                .filter(|group| self.parent_kind(group.kind) == Some(kind))
                .map(|group| (group.namespace.clone(), group.parent.clone()))
                .collect()
        } else {
            self.runs
                .keys()
                .filter(|key| key.kind == kind)
                .map(|key| (key.namespace.clone(), key.name.clone()))
                .collect()
        };
        for (namespace, name) in known.into_iter().filter(|known| !seen.contains(known)) {
            self.removed(kind, &namespace, &name);
        }
    }

    /// An object of `kind` was added or changed.
    pub fn applied(&mut self, kind: usize, object: &DynamicObject, now: Timestamp) -> Vec<Action> {
        let (Some(name), Some(namespace)) = (
            object.metadata.name.as_deref(),
            object.metadata.namespace.as_deref(),
        ) else {
            return Vec::new();
        };
        let namespace = self.intern(namespace);
        if let Some(seen) = self.relisting.get_mut(&kind) {
            seen.insert((namespace.clone(), name.into()));
        }
        let Ok(mut value) = serde_json::to_value(object) else {
            return Vec::new();
        };
        // List items of built-in kinds carry no apiVersion/kind; the model needs them.
        if let Some(map) = value.as_object_mut() {
            let resource = &self.kinds[kind].resource;
            map.insert(
                "apiVersion".into(),
                Value::String(resource.api_version.clone()),
            );
            map.insert("kind".into(), Value::String(resource.kind.clone()));
        }
        match self.kinds[kind].role.clone() {
            Role::Parent => self.parent_applied(kind, &namespace, name, object, &value, now),
            Role::Run { grouping } => self.run_applied(
                kind,
                namespace,
                name,
                object,
                &value,
                grouping.as_ref(),
                now,
            ),
        }
    }

    /// An object of `kind` is gone.
    pub fn removed(&mut self, kind: usize, namespace: &str, name: &str) {
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
        let key = Key {
            kind,
            namespace: namespace.clone(),
            name: name.into(),
        };
        if let Some(record) = self.runs.remove(&key) {
            if let Some(at) = record.deadline {
                self.queue.remove(&(at, key.clone()));
            }
            if let Some(parent) = record.group {
                self.leave_group(kind, &namespace, &parent, name);
            }
        }
    }

    /// Deletions that are due at `now`, overdue first.
    pub fn due(&mut self, now: Timestamp) -> Vec<Action> {
        let mut actions = Vec::new();
        if !self.leader {
            return actions;
        }
        while let Some((at, _)) = self.queue.first()
            && *at <= now
        {
            let Some((at, key)) = self.queue.pop_first() else {
                break;
            };
            let Some(record) = self.runs.get_mut(&key) else {
                continue;
            };
            if record.pending || record.keep || record.deleting || record.deadline != Some(at) {
                continue;
            }
            record.pending = true;
            let event_target = Self::event_target(&self.kinds, &self.parent_uids, &key, record);
            actions.push(Action::Delete {
                key: key.clone(),
                uid: record.uid.text(),
                resource_version: record.resource_version.clone(),
                reason: Reason::Ttl,
                eligible_at: at,
                event_target,
            });
        }
        actions
    }

    /// A DELETE did not happen. On a conflict the watch brings the newer version, which is
    /// judged afresh; any other failure is retried at `retry_at`.
    pub fn delete_failed(&mut self, key: &Key, conflict: bool, retry_at: Timestamp) {
        let Some(record) = self.runs.get_mut(key) else {
            return;
        };
        record.pending = false;
        if !conflict && let Some(at) = record.deadline {
            self.queue.remove(&(at, key.clone()));
            record.deadline = Some(retry_at.max(at));
            self.queue.insert((retry_at.max(at), key.clone()));
        }
    }

    /// A stamp did not happen: ask again on the next change.
    pub fn stamp_failed(&mut self, key: &Key) {
        if let Some(record) = self.runs.get_mut(key) {
            record.stamp_requested = None;
        }
    }

    fn event_target(
        kinds: &[WatchedKind],
        parent_uids: &HashMap<GroupKey, CompactString>,
        key: &Key,
        record: &Record,
    ) -> EventTarget {
        let parent = match &kinds[key.kind].role {
            Role::Run {
                grouping: Some(Grouping::Label { parent, .. } | Grouping::Annotation { parent, .. }),
            } => Some(*parent),
            _ => None,
        };
        if let (Some(parent), Some(name)) = (parent, &record.group) {
            let group = GroupKey {
                kind: key.kind,
                namespace: key.namespace.clone(),
                parent: name.clone(),
            };
            let resource = &kinds[parent].resource;
            return EventTarget {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
                name: name.to_string(),
                uid: parent_uids.get(&group).map(ToString::to_string),
            };
        }
        if let Some(owner) = &record.owner {
            return (**owner).clone();
        }
        let resource = &kinds[key.kind].resource;
        EventTarget {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            name: key.name.to_string(),
            uid: Some(record.uid.text().to_string()),
        }
    }
}
