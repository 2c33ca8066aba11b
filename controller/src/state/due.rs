//! Working through the queue of deadlines: deletions that are due, stamps whose backoff ended,
//! and limits to enforce again once a failed limit deletion may retry.

use super::*;

impl State {
    /// Deletions that are due at `now`, overdue first, and stamps whose backoff ended.
    pub fn due(&mut self, now: Timestamp) -> Vec<Action> {
        let mut actions = Vec::new();
        if !self.leader {
            return actions;
        }
        let mut groups = Vec::new();
        while let Some((at, _)) = self.queue.first()
            && at.get() <= now
        {
            let Some((at, key)) = self.queue.pop_first() else {
                break;
            };
            let Some(record) = self.runs.get_mut(&key) else {
                continue;
            };
            if record.queued != Some(at) {
                continue;
            }
            record.queued = None;
            if let Some(deadline) = record.deadline()
                && record.deletable(now)
            {
                // Pending from here on, dry run or not, so it waits in the queue no more.
                actions.extend(self.delete(key, Reason::Ttl, deadline));
                continue;
            }
            if let Some(stamp) = record.stamp_action(&key, now) {
                actions.push(stamp);
            } else if let Some(parent) = record.group.clone() {
                // A limit deletion that failed: its backoff ended.
                groups.push(GroupKey {
                    kind: key.kind,
                    namespace: key.namespace.clone(),
                    parent,
                });
            }
            // Whatever comes later (a deadline behind a stamp retry) waits in the queue again.
            if !record.pending
                && let Some(later) = record.wake_at(Some(now))
            {
                record.queued = Some(later);
                self.queue.insert((later, key));
            }
        }
        for group in groups {
            actions.extend(self.enforce_limits(&group, now));
        }
        actions
    }
}
