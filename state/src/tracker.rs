//! The deletion engine: the records of runs with their queue ([`Runs`]) and the groups that share
//! limits ([`LimitGroups`]), and what follows when either changes — which deletions, stamps and
//! retries are due, which runs a limit removes, and how a failed write backs off. Only a leader
//! acts: a follower keeps its records and acts on all it held back once it leads.
//! It reports what is due ([`Due`]) and does not decide whether it goes: the state's gate does
//! (`gate.rs`), and the policy book is only read here.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, Registry, Role};

use super::groups::{Enforce, LimitGroups};
use super::keys::{GroupKey, NamespacedName, ObjectKey};
use super::policies::{PolicyBook, PolicyKey, policy_group_prefix};
use super::record::Record;
use super::runs::Runs;
use super::seen::Seen;
use super::steps::{Due, Step};
use super::{Action, Reason, ledger};

#[derive(Debug, Default)]
pub(super) struct Tracker {
    pub(super) runs: Runs,
    pub(super) groups: LimitGroups,
    leader: bool,
    /// Every deletion goes to the ledger (`--ledger-sink`).
    pub(super) ledger: bool,
}

impl Tracker {
    /// Leadership changed: a follower forgets what it asked for; a new leader gets the stamps,
    /// limits and due deletions a follower held back.
    pub(super) fn set_leader(
        &mut self,
        kinds: &Registry,
        book: &PolicyBook,
        leader: bool,
        now: Timestamp,
    ) -> Vec<Step> {
        let was = std::mem::replace(&mut self.leader, leader);
        if !leader {
            for (_, record) in self.runs.iter_mut() {
                record.pending = false;
                record.forget_stamp_request();
            }
            return Vec::new();
        }
        if was {
            return Vec::new();
        }
        let mut steps: Vec<Step> = self
            .runs
            .iter_mut()
            .filter_map(|(key, record)| record.stamp_action(key, now))
            .map(Step::Act)
            .collect();
        for group in self.groups.all() {
            steps.extend(self.enforce_limits(kinds, &group, now));
        }
        steps.extend(self.due(kinds, book, now));
        steps
    }

    pub(super) fn leads(&self) -> bool {
        self.leader
    }

    /// When [`Tracker::due`] next has something to do (never, for a follower).
    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.runs.next_wake().filter(|_| self.leader)
    }

    /// Keeps `record`, the run `key` as now seen (its previous record [`Tracker::untrack`]ed):
    /// its stamp, and its group's limits as `enforce` says.
    pub(super) fn track(
        &mut self,
        kinds: &Registry,
        key: ObjectKey,
        record: Record,
        enforce: Enforce,
        now: Timestamp,
    ) -> Vec<Step> {
        let new_group = record.group.clone();
        self.runs.insert(key.clone(), record);
        let mut steps = Vec::new();
        if self.leader
            && let Some(record) = self.runs.get_mut(&key)
            && let Some(stamp) = record.stamp_action(&key, now)
        {
            steps.push(Step::Act(stamp));
        }
        if let Some(parent) = new_group {
            let group = GroupKey::of(&key, parent);
            self.groups.join(group.clone(), &key.name);
            match enforce {
                Enforce::Not => {}
                Enforce::AtListEnd => self.groups.defer(group),
                Enforce::Now => steps.extend(self.enforce_limits(kinds, &group, now)),
            }
        }
        steps
    }

    /// A parent was seen: the limits it sets on each kind of its runs, enforced at once where
    /// they changed.
    pub(super) fn parent_seen(
        &mut self,
        kinds: &Registry,
        parent: &Seen<'_>,
        now: Timestamp,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        for group in self.groups.parent_seen(kinds, parent) {
            steps.extend(self.enforce_limits(kinds, &group, now));
        }
        steps
    }

    /// The blast-radius guard let `held` go: each is queued at its deadline again (now, or
    /// past), and the limits of their groups enforced.
    pub(super) fn release_held(
        &mut self,
        kinds: &Registry,
        book: &PolicyBook,
        held: &[ObjectKey],
        now: Timestamp,
    ) -> Vec<Step> {
        let mut groups = HashSet::new();
        for key in held {
            if let Some(parent) = self.runs.get(key).and_then(|record| record.group.clone()) {
                groups.insert(GroupKey::of(key, parent));
            }
            self.runs.reschedule(key);
        }
        let mut steps = Vec::new();
        for group in groups {
            steps.extend(self.enforce_limits(kinds, &group, now));
        }
        steps.extend(self.due(kinds, book, now));
        steps
    }

    /// `policy` is gone or changed: the runs it governed wait to be judged afresh, with no
    /// deadline until then, and its groups' limits go.
    pub(super) fn release(&mut self, policy: &Arc<PolicyKey>) {
        self.runs.release(policy);
        self.groups.forget_policy(&policy_group_prefix(policy));
    }

    /// Takes the record of `key` out, and out of its group.
    pub(super) fn untrack(&mut self, key: &ObjectKey) -> Option<Box<Record>> {
        let record = self.runs.take(key)?;
        if let Some(parent) = &record.group {
            self.groups
                .leave(&GroupKey::of(key, parent.clone()), &key.name);
        }
        Some(record)
    }

    /// Deletions that are due at `now`, overdue first, stamps whose backoff ended, and limits
    /// to enforce again once a failed limit deletion may retry.
    pub(super) fn due(&mut self, kinds: &Registry, book: &PolicyBook, now: Timestamp) -> Vec<Step> {
        let mut steps = Vec::new();
        if !self.leader {
            return steps;
        }
        let mut groups = Vec::new();
        while let Some(key) = self.runs.pop_due(now) {
            let Some(record) = self.runs.get_mut(&key) else {
                continue;
            };
            if let Some(deadline) = record.deadline()
                && record.deletable(now)
            {
                // Pending from here on, dry run or not, so it waits in the queue no more.
                steps.extend(self.delete(key, Reason::Ttl, deadline));
                continue;
            }
            // Its notice's time, else a stamp's backoff or a failed limit deletion's ended.
            let notice = record.notice_action(kinds, &key, now);
            let limit_retry = notice.is_none();
            if notice.is_some() {
                let sink =
                    ledger::governing_rules(book, record).and_then(|rules| rules.sink.clone());
                if self.ledger || sink.is_some() {
                    let entry = ledger::expiring(kinds, &key, record, now);
                    steps.push(Step::Act(Action::Announce {
                        key: key.clone(),
                        event_type: kube_retention_common::ledger::EXPIRING,
                        entry: Box::new(entry),
                        sink,
                    }));
                }
            }
            steps.extend(notice.map(Step::Act));
            if let Some(stamp) = record.stamp_action(&key, now) {
                steps.push(Step::Act(stamp));
            } else if limit_retry && let Some(parent) = record.group.clone() {
                groups.push(GroupKey::of(&key, parent));
            }
            self.runs.requeue_after(&key, now);
        }
        for group in groups {
            steps.extend(self.enforce_limits(kinds, &group, now));
        }
        steps
    }

    /// The limits of `group`: the deletions of the runs over them that may go now.
    pub(super) fn enforce_limits(
        &mut self,
        kinds: &Registry,
        group: &GroupKey,
        now: Timestamp,
    ) -> Vec<Step> {
        if !self.leader {
            return Vec::new();
        }
        let mut steps = Vec::new();
        for key in self.groups.over_limit(group, kinds, &self.runs) {
            let ready = self
                .runs
                .get(&key)
                .is_some_and(|record| !record.pending && record.ready(now));
            if ready {
                steps.extend(self.delete(key, Reason::Limit, now));
            }
        }
        steps
    }

    /// `key` is due, for `reason` since `eligible_at`: pending from now on, for the gate.
    fn delete(&mut self, key: ObjectKey, reason: Reason, eligible_at: Timestamp) -> Option<Step> {
        let record = self.runs.get_mut(&key)?;
        record.pending = true;
        Some(Step::Due(Due {
            key,
            reason,
            eligible_at,
        }))
    }

    /// The policy that governs `key`, and whether it is a dry run: what the gate asks.
    pub(super) fn governance(&self, key: &ObjectKey) -> Option<(Option<Arc<PolicyKey>>, bool)> {
        let record = self.runs.get(key)?;
        Some((record.policy.clone(), record.dry_run))
    }

    /// The gate held `key`: not pending, queued again when the guard lets it go.
    pub(super) fn held(&mut self, key: &ObjectKey) {
        if let Some(record) = self.runs.get_mut(key) {
            record.pending = false;
        }
    }

    /// The preconditioned DELETE of what the gate let go.
    pub(super) fn deletion(&self, kinds: &Registry, book: &PolicyBook, due: Due) -> Option<Action> {
        let record = self.runs.get(&due.key)?;
        Some(due.deletion(kinds, &self.groups, book, record, self.ledger))
    }

    /// The list of `kind` ended, having sent the parents in `listed`: a parent it did not send
    /// is gone here; the runs it did not send are answered, for the state to forget.
    pub(super) fn unsent(
        &mut self,
        kinds: &Registry,
        kind: KindId,
        listed: &HashSet<NamespacedName>,
    ) -> Vec<ObjectKey> {
        if kinds[kind].role == Role::Parent {
            for (namespace, name) in self.groups.parents(kinds, kind) {
                if !listed.contains(&(namespace.clone(), name.clone())) {
                    self.groups.parent_gone(kinds, kind, &namespace, &name);
                }
            }
            return Vec::new();
        }
        self.runs.unlisted(kind)
    }

    /// The limits of the groups a list of `kind` changed, enforced now it ended.
    pub(super) fn deferred_limits(
        &mut self,
        kinds: &Registry,
        kind: KindId,
        now: Timestamp,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        for group in self.groups.take_deferred(kind) {
            steps.extend(self.enforce_limits(kinds, &group, now));
        }
        steps
    }
}
