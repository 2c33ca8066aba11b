//! The Cleaners and what their targets resolve to, and when each is evaluated next; pure and
//! clock-injected, so every decision is tested without a cluster. The index from a kind and
//! namespace to the Cleaners referring to it is what makes a change to a target wake its
//! Cleaners at once rather than at their next `retry.period`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{ApiResource, GroupVersionKind};
use kube_retention_common::cleaner::{Cleaner, CleanerSpec, Judge, Verdict};

use super::status::Problem;
use super::targets::{KindObjects, kind_of};

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

/// Whether a referenced kind can be watched.
#[derive(Debug)]
pub enum KindState {
    /// Discovery has not answered yet.
    Resolving,
    /// Not served, or not permitted: the reason.
    Unavailable(String),
    Served(KindObjects),
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
    created: Timestamp,
    spec: CleanerSpec,
    /// The judge of its spec, or what is wrong with the spec.
    judge: Result<Judge, Vec<kube_retention_common::FieldError>>,
    next: Option<Timestamp>,
    acting: bool,
}

#[derive(Debug, Default)]
pub struct Book {
    cleaners: BTreeMap<CleanerKey, Tracked>,
    kinds: HashMap<GroupVersionKind, KindState>,
    /// (kind, namespace) → the Cleaners with a target of that kind there.
    wanted: HashMap<(GroupVersionKind, String), BTreeSet<CleanerKey>>,
    schedule: BTreeSet<(Timestamp, CleanerKey)>,
    woken: BTreeSet<CleanerKey>,
    /// Cleaners seen by a list under way.
    relisting: Option<BTreeSet<CleanerKey>>,
    cleaners_listed: bool,
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
        if let Some(tracked) = self.cleaners.get(&key)
            && tracked.uid == uid
            && tracked.spec == cleaner.spec
        {
            return;
        }
        self.forget(&key);
        let created = cleaner
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |time| time.0);
        let judge = Judge::new(&cleaner.spec);
        for target in &cleaner.spec.targets {
            let kind = kind_of(&target.reference);
            self.kinds
                .entry(kind.clone())
                .or_insert(KindState::Resolving);
            self.wanted
                .entry((kind, key.namespace.clone()))
                .or_default()
                .insert(key.clone());
        }
        let tracked = Tracked {
            uid,
            created,
            spec: cleaner.spec.clone(),
            judge,
            next: None,
            acting: false,
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
            let index = (kind_of(&target.reference), key.namespace.clone());
            if let Some(cleaners) = self.wanted.get_mut(&index) {
                cleaners.remove(key);
                if cleaners.is_empty() {
                    self.wanted.remove(&index);
                }
            }
        }
    }

    /// Kinds no Cleaner refers to any more are no longer watched.
    fn forget_unwanted_kinds(&mut self) {
        let wanted: std::collections::HashSet<&GroupVersionKind> =
            self.wanted.keys().map(|(kind, _)| kind).collect();
        self.kinds.retain(|kind, _| wanted.contains(kind));
    }

    /// A Cleaner's uid and spec.
    pub fn identity(&self, key: &CleanerKey) -> Option<(String, &CleanerSpec)> {
        let tracked = self.cleaners.get(key)?;
        Some((tracked.uid.clone(), &tracked.spec))
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
                    .is_some_and(|tracked| !tracked.acting && self.known(tracked))
            })
            .cloned()
            .collect();
        for key in &ready {
            self.woken.remove(key);
        }
        ready
    }

    fn known(&self, tracked: &Tracked) -> bool {
        tracked.spec.targets.iter().all(|target| {
            match self.kinds.get(&kind_of(&target.reference)) {
                Some(KindState::Served(objects)) => objects.listed(),
                Some(KindState::Unavailable(_)) => true,
                Some(KindState::Resolving) | None => false,
            }
        })
    }
}

mod evaluate;
mod objects;

pub use objects::Unavailable;
