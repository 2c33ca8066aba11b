//! The gate every deletion the tracker finds due passes, owned by the state: a new generation's
//! blast-radius guard may hold it, a dry run reports it on its policy, else it is sent
//! ([`State::gated`]). And where the guard's count meets the runs: what a counting policy would
//! delete now ([`due_under`]), and the guards deciding once the objects they govern are all
//! judged ([`State::settled`]). The guards' own states are [`super::guard`]'s; the tracker only
//! reports what is due, and the policy book is only read while it does.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, Registry};

use super::keys::ObjectKey;
use super::policies::{PolicyKey, policy_group_prefix};
use super::record::Record;
use super::steps::Step;
use super::tracker::Tracker;
use super::{Action, Reason, State};

/// What `policy` would delete at `now` among what `tracker` keeps, leader or not: its runs past
/// their deadline, and the members of its groups over their limits.
pub(super) fn due_under(
    tracker: &Tracker,
    kinds: &Registry,
    policy: &Arc<PolicyKey>,
    now: Timestamp,
) -> Vec<(ObjectKey, Timestamp, Reason)> {
    let mine = |record: &Record| record.policy.as_ref() == Some(policy) && !record.pending;
    let mut due: Vec<(ObjectKey, Timestamp, Reason)> = tracker
        .runs
        .iter()
        .filter(|(_, record)| mine(record) && !record.exempt())
        .filter_map(|(key, record)| Some((key.clone(), record.deadline()?, Reason::Ttl)))
        .filter(|(_, deadline, _)| *deadline <= now)
        .collect();
    for group in tracker.groups.with_prefix(&policy_group_prefix(policy)) {
        for key in tracker.groups.over_limit(&group, kinds, &tracker.runs) {
            if tracker.runs.get(&key).is_some_and(mine) {
                due.push((key, now, Reason::Limit));
            }
        }
    }
    due
}

impl State {
    /// What the tracker answered, its due deletions through the gate: held by the guard (queued
    /// again when it lets them go), reported on a dry-run policy, or the DELETE.
    pub(super) fn gated(&mut self, steps: Vec<Step>) -> Vec<Action> {
        let mut actions = Vec::new();
        for step in steps {
            let due = match step {
                Step::Act(action) => {
                    actions.push(action);
                    continue;
                }
                Step::Due(due) => due,
            };
            let Some((policy, dry_run)) = self.tracker.governance(&due.key) else {
                continue;
            };
            if let Some(policy) = &policy
                && self
                    .guards
                    .holds(policy, &due.key, due.eligible_at, due.reason)
            {
                self.tracker.held(&due.key);
            } else if dry_run {
                if let Some(policy) = policy {
                    let (key, at, reason) = (&due.key, due.eligible_at, due.reason);
                    self.policies.would_have_deleted(policy, key, at, reason);
                }
            } else {
                actions.extend(self.tracker.deletion(&self.kinds, &self.policies, due));
            }
        }
        actions
    }

    /// The objects of `kind` listed have been judged, but for those of the namespaces in
    /// `unsettled` that still wait for their policies' expressions: the blast-radius guards
    /// counting it may decide, each where its own objects are judged (a RetentionPolicy once its
    /// namespace is not in `unsettled`, a ClusterRetentionPolicy once `unsettled` is empty), and
    /// what an accepted one held goes.
    pub fn settled(
        &mut self,
        kind: KindId,
        now: Timestamp,
        unsettled: &HashSet<Arc<str>>,
    ) -> Vec<Action> {
        let resource = &self.kinds[kind].resource;
        let settled = self
            .guards
            .settled(&resource.group, &resource.kind, unsettled);
        let mut actions = Vec::new();
        for policy in settled {
            let due = due_under(&self.tracker, &self.kinds, &policy, now);
            let released = self.guards.decide(&policy, due);
            let steps = self
                .tracker
                .release_held(&self.kinds, &self.policies, &released, now);
            actions.extend(self.gated(steps));
        }
        actions
    }
}
