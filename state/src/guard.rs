//! The blast-radius guard. A policy that is new, or whose spec changed (a new generation), may
//! make many objects due at once: a TTL shortened from a month to an hour, a limit cut from 100
//! to one. Such a generation first deletes nothing: what it would delete is held and counted until
//! every kind it names has been listed afresh under it and each object listed judged (those whose
//! expressions are evaluated off the loop too: [`Guards::settled`]). The count is what it held
//! and what it would delete now, leader or not ([`due_under`]). If that is at most its threshold
//! (`spec.safety.maxImmediateDeletions`, else the controller's `--max-immediate-deletions`),
//! the held deletions go and the generation is accepted; if more, the policy awaits approval —
//! the generation named in its `retention.dev/approved-generation` annotation, which only a
//! writer who may delete what it governs can set (the webhook's writer check). The accepted
//! generation is kept in the policy's status, so a restart does not count again.
//!
//! Objects held are not pending: nothing is in flight for them. A held object that changes is
//! judged again and held again; one that goes is no longer counted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, group_of};

use super::Reason;
use super::keys::ObjectKey;
use super::loaded::LoadedPolicy;
use kube_retention_common::policies::PolicyKey;

/// How many held deletions a policy's status names.
pub const HELD_SHOWN: usize = 20;

/// Where a policy's generation stands with the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its deletions are carried out.
    Accepted,
    /// Counting what it would delete at once, until the kinds it names are listed afresh.
    Counting,
    /// It would delete more at once than its threshold allows: nothing until approved.
    AwaitingApproval,
}

/// A kind a counting policy waits for, by group and kind.
type KindName = (String, String);

/// How far a kind a counting policy waits for has come since the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// No list of it has begun since the change.
    Waiting,
    /// A list begun since the change is under way.
    Listing,
    /// That list ended; objects whose expressions are being evaluated may still be judged.
    Listed,
}

#[derive(Debug)]
struct PolicyGuard {
    standing: Standing,
    threshold: u32,
    /// The kinds to be listed afresh, and their objects judged, under this generation.
    lists: HashMap<KindName, Progress>,
    held: BTreeMap<ObjectKey, (Timestamp, Reason)>,
}

/// What the guard says of a policy, for its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardReport {
    pub standing: Standing,
    pub threshold: u32,
    /// Deletions held back: how many of each kind, and the first ones by when they fell due.
    pub held: BTreeMap<KindId, usize>,
    pub sample: Vec<(ObjectKey, Timestamp, Reason)>,
}

#[derive(Debug, Default)]
pub(super) struct Guards {
    /// The threshold of a policy that sets none (`--max-immediate-deletions`); 0: no guard.
    pub(super) default_threshold: u32,
    policies: HashMap<Arc<PolicyKey>, PolicyGuard>,
    /// Policies whose next generation is being compiled: nothing they govern goes meanwhile.
    changing: HashSet<PolicyKey>,
}

impl Guards {
    /// `loaded` is `key`'s generation from now on: accepted at once where the guard has nothing
    /// to do (no threshold, a dry run, an invalid spec, a generation accepted or approved
    /// before), counted otherwise.
    pub(super) fn arm(&mut self, key: Arc<PolicyKey>, loaded: &LoadedPolicy) {
        let threshold = loaded
            .rules
            .max_immediate_deletions
            .unwrap_or(self.default_threshold);
        let generation = loaded.generation;
        let passed = generation.is_some()
            && (loaded.approval.accepted == generation || loaded.approval.approved == generation);
        let lists: HashMap<KindName, Progress> = loaded
            .rules
            .kinds
            .iter()
            .map(|kind| {
                let name = (group_of(&kind.api_version).to_owned(), kind.kind.clone());
                (name, Progress::Waiting)
            })
            .collect();
        let unguarded = threshold == 0 || loaded.rules.dry_run || loaded.valid_rules().is_none();
        let standing = match unguarded || passed || lists.is_empty() {
            true => Standing::Accepted,
            false => Standing::Counting,
        };
        let guard = PolicyGuard {
            standing,
            threshold,
            lists,
            held: BTreeMap::new(),
        };
        self.policies.insert(key, guard);
    }

    /// `key` is gone or about to change: what it held is judged afresh by its next generation.
    pub(super) fn disarm(&mut self, key: &PolicyKey) {
        self.policies.remove(key);
        self.changing.remove(key);
    }

    /// `key`'s next generation is on its way (compiled off the loop): until it is armed, the
    /// generation it replaces deletes nothing — its writer may have taken a TTL away.
    pub(super) fn hold_changing(&mut self, key: PolicyKey) {
        self.changing.insert(key);
    }

    /// Whether `policy` holds the deletion of `key`, due at `at` for `reason`; it is counted.
    pub(super) fn holds(
        &mut self,
        policy: &PolicyKey,
        key: &ObjectKey,
        at: Timestamp,
        reason: Reason,
    ) -> bool {
        if self.changing.contains(policy) {
            return true;
        }
        let Some(guard) = self.policies.get_mut(policy) else {
            return false;
        };
        if guard.standing == Standing::Accepted {
            return false;
        }
        guard.held.insert(key.clone(), (at, reason));
        true
    }

    /// `key` is gone: no guard counts it.
    pub(super) fn forget_object(&mut self, key: &ObjectKey) {
        for guard in self.policies.values_mut() {
            guard.held.remove(key);
        }
    }

    /// A list of the kind `group`/`kind` began — cluster-wide, or in `namespace` alone (a
    /// RetentionPolicy there changed): it counts for the policies waiting for one that it
    /// covers (in `namespace`, that namespace's RetentionPolicies: they govern nothing else).
    pub(super) fn list_started(&mut self, group: &str, kind: &str, namespace: Option<&str>) {
        let name = (group.to_owned(), kind.to_owned());
        for (key, guard) in &mut self.policies {
            if covers(namespace, key)
                && guard.standing == Standing::Counting
                && let Some(progress) = guard.lists.get_mut(&name)
            {
                *progress = Progress::Listing;
            }
        }
    }

    /// A list of the kind `group`/`kind` ended (cluster-wide, or in `namespace` alone).
    pub(super) fn list_done(&mut self, group: &str, kind: &str, namespace: Option<&str>) {
        let name = (group.to_owned(), kind.to_owned());
        for (key, guard) in &mut self.policies {
            if covers(namespace, key)
                && let Some(progress) = guard.lists.get_mut(&name)
                && *progress == Progress::Listing
            {
                *progress = Progress::Listed;
            }
        }
    }

    /// The objects of the kind `group`/`kind` listed have been judged but in the namespaces
    /// `unsettled`, whose objects still wait for their expressions. Answers the policies whose
    /// count that completes: each is then [`Guards::decide`]d. A policy waits only for the
    /// namespaces it governs, so a tenant whose objects keep the evaluator busy delays no other
    /// tenant's count (a ClusterRetentionPolicy governs them all and waits for all).
    pub(super) fn settled(
        &mut self,
        group: &str,
        kind: &str,
        unsettled: &HashSet<Arc<str>>,
    ) -> Vec<Arc<PolicyKey>> {
        let name = (group.to_owned(), kind.to_owned());
        let mut complete = Vec::new();
        for (key, guard) in &mut self.policies {
            let waits = match &key.namespace {
                Some(namespace) => unsettled.contains(namespace.as_str()),
                None => !unsettled.is_empty(),
            };
            if waits
                || guard.standing != Standing::Counting
                || guard.lists.get(&name) != Some(&Progress::Listed)
            {
                continue;
            }
            guard.lists.remove(&name);
            if guard.lists.is_empty() {
                complete.push(key.clone());
            }
        }
        complete
    }

    /// The count of `policy` is complete: `due` is what it would delete now besides what it held
    /// already. Within its threshold it is accepted, and answers the held deletions to let go;
    /// beyond, it awaits approval and holds them all.
    pub(super) fn decide(
        &mut self,
        policy: &PolicyKey,
        due: Vec<(ObjectKey, Timestamp, Reason)>,
    ) -> Vec<ObjectKey> {
        let Some(guard) = self.policies.get_mut(policy) else {
            return Vec::new();
        };
        for (key, at, reason) in due {
            guard.held.entry(key).or_insert((at, reason));
        }
        let held = guard.held.len();
        if held > usize::try_from(guard.threshold).unwrap_or(usize::MAX) {
            tracing::warn!(%policy, held, threshold = guard.threshold, "policy would delete more at once than its threshold; awaiting approval");
            guard.standing = Standing::AwaitingApproval;
            return Vec::new();
        }
        guard.standing = Standing::Accepted;
        std::mem::take(&mut guard.held).into_keys().collect()
    }

    /// Whether some policy holds the deletion of `key`.
    pub(super) fn is_held(&self, key: &ObjectKey) -> bool {
        self.policies
            .values()
            .any(|guard| guard.held.contains_key(key))
    }

    /// Deletions held in all, and the policies awaiting approval.
    pub(super) fn totals(&self) -> (usize, usize) {
        let held = self.policies.values().map(|guard| guard.held.len()).sum();
        let awaiting = self
            .policies
            .values()
            .filter(|guard| guard.standing == Standing::AwaitingApproval);
        (held, awaiting.count())
    }

    /// What the guard says of `key`, where it has armed it.
    pub(super) fn report(&self, key: &PolicyKey) -> Option<GuardReport> {
        let guard = self.policies.get(key)?;
        let mut sample: Vec<(ObjectKey, Timestamp, Reason)> = guard
            .held
            .iter()
            .map(|(key, (at, reason))| (key.clone(), *at, *reason))
            .collect();
        sample.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        sample.truncate(HELD_SHOWN);
        let mut held = BTreeMap::new();
        for key in guard.held.keys() {
            *held.entry(key.kind).or_default() += 1;
        }
        Some(GuardReport {
            standing: guard.standing,
            threshold: guard.threshold,
            held,
            sample,
        })
    }
}

/// Whether a list in `namespace` (cluster-wide: `None`) lists all that the policy `key`
/// governs.
fn covers(namespace: Option<&str>, key: &PolicyKey) -> bool {
    namespace.is_none_or(|namespace| key.namespace.as_deref() == Some(namespace))
}
