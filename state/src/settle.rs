//! Where the blast-radius guard's count meets the runs: what a counting policy would delete
//! now ([`due_under`]), and the guards deciding once the objects they govern are all judged
//! ([`settle`]). The guards' own states are [`super::guard`]'s.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, Registry};

use super::keys::ObjectKey;
use super::policies::{PolicyKey, policy_group_prefix};
use super::record::Record;
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

/// The count of the policies waiting for `kind` is complete where the objects they govern are
/// all judged (none of `unsettled`'s): each is decided, and what an accepted one held goes.
pub(super) fn settle(
    state: &mut State,
    kind: KindId,
    now: Timestamp,
    unsettled: &HashSet<Arc<str>>,
) -> Vec<Action> {
    let (kinds, tracker, book) = (&state.kinds, &mut state.tracker, &mut state.policies);
    let resource = &kinds[kind].resource;
    let mut actions = Vec::new();
    for policy in book
        .guards
        .settled(&resource.group, &resource.kind, unsettled)
    {
        let due = due_under(tracker, kinds, &policy, now);
        let released = book.guards.decide(&policy, due);
        actions.extend(tracker.release_held(kinds, book, &released, now));
    }
    actions
}
