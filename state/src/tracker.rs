//! The deletion engine: the records of runs with their queue ([`Runs`]) and the groups that share
//! limits ([`LimitGroups`]), and what follows when either changes — which deletions, stamps and
//! retries are due, which runs a limit removes, and how a failed write backs off. Only a leader
//! acts: a follower keeps its records and acts on all it held back once it leads.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::Registry;

use super::groups::LimitGroups;
use super::keys::{GroupKey, ObjectKey};
use super::policies::{PolicyBook, PolicyKey, policy_group_prefix};
use super::record::Record;
use super::runs::Runs;
use super::seen::Seen;
use super::{Action, Governance, Reason, action, ledger};

/// When the limits of a run's group are enforced after the run changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Enforce {
    /// It counts for limits as it did.
    Not,
    /// Once its kind's list ends, for all the groups the list changed.
    AtListEnd,
    Now,
}

impl Enforce {
    /// For a run that counts differently for limits (`changed`) or not, while its kind is
    /// `listing` or not.
    pub(super) fn after(changed: bool, listing: bool) -> Self {
        match (changed, listing) {
            (false, _) => Self::Not,
            (true, true) => Self::AtListEnd,
            (true, false) => Self::Now,
        }
    }
}

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
        book: &mut PolicyBook,
        leader: bool,
        now: Timestamp,
    ) -> Vec<Action> {
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
        let mut actions: Vec<Action> = self
            .runs
            .iter_mut()
            .filter_map(|(key, record)| record.stamp_action(key, now))
            .collect();
        for group in self.groups.all() {
            actions.extend(self.enforce_limits(kinds, book, &group, now));
        }
        actions.extend(self.due(kinds, book, now));
        actions
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
        book: &mut PolicyBook,
        key: ObjectKey,
        record: Record,
        enforce: Enforce,
        now: Timestamp,
    ) -> Vec<Action> {
        let new_group = record.group.clone();
        self.runs.insert(key.clone(), record);
        let mut actions = Vec::new();
        if self.leader
            && let Some(record) = self.runs.get_mut(&key)
            && let Some(stamp) = record.stamp_action(&key, now)
        {
            actions.push(stamp);
        }
        if let Some(parent) = new_group {
            let group = GroupKey::of(&key, parent);
            self.groups.join(group.clone(), &key.name);
            match enforce {
                Enforce::Not => {}
                Enforce::AtListEnd => self.groups.defer(group),
                Enforce::Now => actions.extend(self.enforce_limits(kinds, book, &group, now)),
            }
        }
        actions
    }

    /// A parent was seen: the limits it sets on each kind of its runs, enforced at once where
    /// they changed.
    pub(super) fn parent_seen(
        &mut self,
        kinds: &Registry,
        book: &mut PolicyBook,
        parent: &Seen<'_>,
        now: Timestamp,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        for group in self.groups.parent_seen(kinds, parent) {
            actions.extend(self.enforce_limits(kinds, book, &group, now));
        }
        actions
    }

    /// The blast-radius guard let `held` go: each is queued at its deadline again (now, or
    /// past), and the limits of their groups enforced.
    pub(super) fn release_held(
        &mut self,
        kinds: &Registry,
        book: &mut PolicyBook,
        held: &[ObjectKey],
        now: Timestamp,
    ) -> Vec<Action> {
        let mut groups = HashSet::new();
        for key in held {
            if let Some(parent) = self.runs.get(key).and_then(|record| record.group.clone()) {
                groups.insert(GroupKey::of(key, parent));
            }
            self.runs.reschedule(key);
        }
        let mut actions = Vec::new();
        for group in groups {
            actions.extend(self.enforce_limits(kinds, book, &group, now));
        }
        actions.extend(self.due(kinds, book, now));
        actions
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

    /// The run `key` is gone: from its group, and from its policy's reports.
    pub(super) fn forget_run(&mut self, book: &mut PolicyBook, key: &ObjectKey) {
        let record = self.untrack(key);
        book.forget_object(
            key,
            record.as_ref().and_then(|record| record.policy.as_ref()),
        );
    }

    /// Deletions that are due at `now`, overdue first, stamps whose backoff ended, and limits
    /// to enforce again once a failed limit deletion may retry.
    pub(super) fn due(
        &mut self,
        kinds: &Registry,
        book: &mut PolicyBook,
        now: Timestamp,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        if !self.leader {
            return actions;
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
                actions.extend(self.delete(kinds, book, key, Reason::Ttl, deadline));
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
                    actions.push(Action::Announce {
                        key: key.clone(),
                        event_type: kube_retention_common::ledger::EXPIRING,
                        entry: Box::new(entry),
                        sink,
                    });
                }
            }
            actions.extend(notice);
            if let Some(stamp) = record.stamp_action(&key, now) {
                actions.push(stamp);
            } else if limit_retry && let Some(parent) = record.group.clone() {
                groups.push(GroupKey::of(&key, parent));
            }
            self.runs.requeue_after(&key, now);
        }
        for group in groups {
            actions.extend(self.enforce_limits(kinds, book, &group, now));
        }
        actions
    }

    /// The limits of `group`: the deletions of the runs over them that may go now.
    pub(super) fn enforce_limits(
        &mut self,
        kinds: &Registry,
        book: &mut PolicyBook,
        group: &GroupKey,
        now: Timestamp,
    ) -> Vec<Action> {
        if !self.leader {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for key in self.groups.over_limit(group, kinds, &self.runs) {
            let ready = self
                .runs
                .get(&key)
                .is_some_and(|record| !record.pending && record.ready(now));
            if ready {
                actions.extend(self.delete(kinds, book, key, Reason::Limit, now));
            }
        }
        actions
    }

    /// The preconditioned DELETE of `key`, which is pending from now on; in a dry run none, the
    /// deletion reported on its policy instead. `eligible_at` is when it became deletable.
    fn delete(
        &mut self,
        kinds: &Registry,
        book: &mut PolicyBook,
        key: ObjectKey,
        reason: Reason,
        eligible_at: Timestamp,
    ) -> Option<Action> {
        let record = self.runs.get_mut(&key)?;
        if let Some(policy) = &record.policy
            && book.guards.holds(policy, &key, eligible_at, reason)
        {
            // Held, not pending: it is queued again when the guard lets it go.
            return None;
        }
        record.pending = true;
        if record.dry_run {
            if let Some(policy) = record.policy.clone() {
                book.would_have_deleted(policy, &key, eligible_at, reason);
            }
            return None;
        }
        let event_target = action::event_target(kinds, &self.groups, &key, record);
        let rules = ledger::governing_rules(book, record);
        let ledger = (self.ledger || rules.is_some_and(|rules| rules.sink.is_some()))
            .then(|| Box::new(ledger::deletion(rules, record, reason, &event_target)));
        Some(Action::Delete {
            uid: record.uid.text(),
            resource_version: record.resource_version.clone(),
            reason,
            eligible_at,
            event_target,
            policy: record.policy.clone().map(|policy| Governance {
                policy,
                overruled: book.overruled(&key),
            }),
            ledger,
            key,
        })
    }
}
