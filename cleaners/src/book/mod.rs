//! The Cleaners and what their targets resolve to, and when each is evaluated next; pure and
//! clock-injected, so every decision is tested without a cluster. Targets are watched by
//! [`Scope`] — one kind in one namespace, that of the Cleaners referring to it — never across
//! the cluster: a tenant's Cleaner sees, holds and costs only its own namespace's objects, and
//! only as much of them as its conditions read ([`ScopeWatch`]). The index from a scope to the
//! Cleaners referring to it is what makes a change to a target wake its Cleaners at once rather
//! than at their next `retry.period`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_common::annotations::APPROVED_GENERATION;
use kube_retention_common::cleaner::{Cleaner, CleanerSpec, Verdict};
use kube_retention_common::policies::approved_generation;

use super::status::Problem;
use super::targets::{KindObjects, kind_of};

mod compile;
mod evaluate;
mod held;
mod objects;
mod scopes;

use compile::Judgement;
pub use compile::{CompileRequest, CompiledSpec};
pub use evaluate::Prepared;
pub use held::{IN_ALL as TARGETS_HELD_IN_ALL, PER_NAMESPACE as TARGETS_HELD_PER_NAMESPACE};
pub use objects::Unavailable;
pub use scopes::{KINDS_PER_NAMESPACE, Scope, ScopeWatch};

/// A Cleaner by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CleanerKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for CleanerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether a referenced kind is served, as discovery answered.
#[derive(Debug, Clone)]
pub enum KindState {
    /// Discovery has not answered yet.
    Resolving,
    /// Not served: the reason.
    Unavailable(String),
    Served(ApiResource),
}

/// A scope's targets: watched, or why not.
#[derive(Debug)]
pub enum ScopeState {
    Watching(KindObjects),
    /// The API server refused to list or watch them, or the namespace refers to too many kinds.
    Unavailable(String),
}

/// An object to delete, exactly this one (its uid).
#[derive(Debug, Clone, PartialEq)]
pub struct Doomed {
    pub resource: ApiResource,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What cleaning a group does.
#[derive(Debug, Clone, PartialEq)]
pub struct Clean {
    pub cleaner: CleanerKey,
    pub uid: String,
    /// The Cleaner's generation, and whether it is approved past the blast-radius guard (its
    /// `retention.dev/approved-generation` names it).
    pub generation: Option<i64>,
    pub approved: bool,
    pub objects: Vec<Doomed>,
    pub release: Option<String>,
    pub sink: Option<String>,
}

/// The outcome of one evaluation.
#[derive(Debug)]
pub struct Evaluation {
    pub verdict: Result<Verdict, Problem>,
    pub resolved: Vec<String>,
    pub clean: Option<Clean>,
}

#[derive(Debug)]
struct Tracked {
    uid: String,
    /// The Cleaner's `metadata.generation`, which its status conditions say they observed.
    generation: Option<i64>,
    /// The generation its `retention.dev/approved-generation` approves past the blast-radius
    /// guard, if any.
    approved: Option<i64>,
    created: Timestamp,
    spec: CleanerSpec,
    /// The judge of its spec, or what is wrong with the spec, once compiled.
    judge: Judgement,
    next: Option<Timestamp>,
    acting: bool,
    /// The evaluation prepared last, while its verdict is awaited.
    evaluating: Option<u64>,
}

#[derive(Debug, Default)]
pub struct Book {
    cleaners: BTreeMap<CleanerKey, Tracked>,
    kinds: HashMap<GroupVersionKind, KindState>,
    scopes: held::Scopes,
    /// Scope → the Cleaners with a target of that kind in that namespace.
    wanted: HashMap<Scope, BTreeSet<CleanerKey>>,
    schedule: BTreeSet<(Timestamp, CleanerKey)>,
    woken: BTreeSet<CleanerKey>,
    /// Cleaners seen by a list under way.
    relisting: Option<BTreeSet<CleanerKey>>,
    cleaners_listed: bool,
    /// The last evaluation prepared or compilation asked for.
    seq: u64,
    /// Whether the watches must be planned again ([`Book::plan_watches`]).
    replan: bool,
}

impl Book {
    pub fn relist_started(&mut self) {
        self.relisting = Some(BTreeSet::new());
    }

    /// Ends a list of Cleaners: those it did not deliver are gone, the others all evaluated.
    pub fn relist_done(&mut self) {
        let seen = self.relisting.take().unwrap_or_default();
        let gone: Vec<CleanerKey> = self
            .cleaners
            .keys()
            .filter(|key| !seen.contains(key))
            .cloned()
            .collect();
        for key in gone {
            self.removed(&key);
        }
        self.cleaners_listed = true;
        self.woken.extend(self.cleaners.keys().cloned());
    }

    /// A Cleaner created or changed; only a new spec (or a new object of the name) wakes it —
    /// its own status writes do not.
    pub fn applied(&mut self, cleaner: &Cleaner) {
        let (Some(namespace), name) = (cleaner.namespace(), cleaner.name_any()) else {
            return;
        };
        let key = CleanerKey { namespace, name };
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert(key.clone());
        }
        let uid = cleaner.uid().unwrap_or_default();
        let generation = cleaner.metadata.generation;
        let approved = cleaner
            .annotations()
            .get(APPROVED_GENERATION)
            .and_then(|value| approved_generation(value).ok());
        if let Some(tracked) = self.cleaners.get_mut(&key)
            && tracked.uid == uid
            && tracked.spec == cleaner.spec
        {
            tracked.generation = generation;
            // An approval wakes it: the guard may have held its clean.
            if std::mem::replace(&mut tracked.approved, approved) != approved && !tracked.acting {
                self.woken.insert(key);
            }
            return;
        }
        self.forget(&key);
        let created = cleaner
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |time| time.0);
        for target in &cleaner.spec.targets {
            let kind = kind_of(&target.reference);
            self.kinds
                .entry(kind.clone())
                .or_insert(KindState::Resolving);
            self.wanted
                .entry(Scope::new(kind, &key.namespace))
                .or_default()
                .insert(key.clone());
        }
        let tracked = Tracked {
            uid,
            generation,
            approved,
            created,
            spec: cleaner.spec.clone(),
            judge: Judgement::Uncompiled,
            next: None,
            acting: false,
            evaluating: None,
        };
        self.cleaners.insert(key.clone(), tracked);
        self.woken.insert(key);
        self.forget_unwanted_kinds();
    }

    pub fn removed(&mut self, key: &CleanerKey) {
        self.forget(key);
        self.forget_unwanted_kinds();
    }

    /// Takes the Cleaner `key` out of the schedule and the index.
    fn forget(&mut self, key: &CleanerKey) {
        let Some(tracked) = self.cleaners.remove(key) else {
            return;
        };
        if let Some(next) = tracked.next {
            self.schedule.remove(&(next, key.clone()));
        }
        self.woken.remove(key);
        for target in &tracked.spec.targets {
            let index = Scope::new(kind_of(&target.reference), &key.namespace);
            if let Some(cleaners) = self.wanted.get_mut(&index) {
                cleaners.remove(key);
                if cleaners.is_empty() {
                    self.wanted.remove(&index);
                }
            }
        }
    }

    /// Kinds and scopes no Cleaner refers to any more are no longer watched.
    fn forget_unwanted_kinds(&mut self) {
        self.replan = true;
        let wanted: std::collections::HashSet<&GroupVersionKind> =
            self.wanted.keys().map(|scope| &scope.kind).collect();
        self.kinds.retain(|kind, _| wanted.contains(kind));
        self.scopes
            .retain(|scope, _| self.wanted.contains_key(scope));
    }

    /// A Cleaner's uid and spec.
    pub fn identity(&self, key: &CleanerKey) -> Option<(String, &CleanerSpec)> {
        let tracked = self.cleaners.get(key)?;
        Some((tracked.uid.clone(), &tracked.spec))
    }

    /// The generation of the Cleaner `key` last seen.
    pub fn generation_of(&self, key: &CleanerKey) -> Option<i64> {
        self.cleaners.get(key)?.generation
    }

    /// When the Cleaner `key` is evaluated next, if scheduled.
    pub fn next_of(&self, key: &CleanerKey) -> Option<Timestamp> {
        self.cleaners.get(key)?.next
    }

    /// When the next scheduled evaluation is due.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.schedule.first().map(|(at, _)| *at)
    }

    /// The Cleaners to evaluate now: woken or due, with every target kind known, not cleaning.
    pub fn take_due(&mut self, now: Timestamp) -> Vec<CleanerKey> {
        while let Some((at, key)) = self.schedule.first().cloned()
            && at <= now
        {
            self.schedule.pop_first();
            if let Some(tracked) = self.cleaners.get_mut(&key) {
                tracked.next = None;
            }
            self.woken.insert(key);
        }
        if !self.cleaners_listed {
            return Vec::new();
        }
        let ready: Vec<CleanerKey> = self
            .woken
            .iter()
            .filter(|key| {
                self.cleaners
                    .get(*key)
                    .is_some_and(|tracked| !tracked.acting && self.known(key, tracked))
            })
            .cloned()
            .collect();
        for key in &ready {
            self.woken.remove(key);
        }
        ready
    }

    fn known(&self, key: &CleanerKey, tracked: &Tracked) -> bool {
        tracked.spec.targets.iter().all(|target| {
            let kind = kind_of(&target.reference);
            match self.kinds.get(&kind) {
                Some(KindState::Served(_)) => {
                    match self.scopes.get(&Scope::new(kind, &key.namespace)) {
                        Some(ScopeState::Watching(objects)) => objects.listed(),
                        Some(ScopeState::Unavailable(_)) => true,
                        None => false,
                    }
                }
                Some(KindState::Unavailable(_)) => true,
                Some(KindState::Resolving) | None => false,
            }
        })
    }
}
