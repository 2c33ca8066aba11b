//! The records of tracked runs and the queue of when each next needs attention (a deadline, the
//! end of a backoff). One type, so a record and its place in the queue never disagree: every
//! change that can move a record's time goes through [`Runs::reschedule`]; and so the records'
//! count against their bound ([`Room`]) never disagrees with them either: every record kept
//! or taken out goes through [`Runs::insert`] or [`Runs::take`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use kube_retention_common::kinds::{KindId, Registry};

use super::compact::CompactTime;
use super::failures::{Failure, Step};
use super::keys::ObjectKey;
use super::record::Record;
use super::room::Room;
use super::{Action, PolicyKey, Warning};

/// How many runs of a namespace one pass over the records finds to let go of for room.
const LET_GO_BATCH: usize = 1024;
/// For how many of the heaviest namespaces one pass finds runs to let go of: namespaces tied
/// at the top take turns at being the heaviest, one run each.
const LET_GO_NAMESPACES: usize = 8;

#[derive(Debug, Default)]
pub(super) struct Runs {
    /// Boxed, so the table's slots stay small: a table grows by doubling and holds both its
    /// old and new slots while it does, which at 100,000 records was the listing's peak.
    records: HashMap<ObjectKey, Box<Record>>,
    queue: BTreeSet<(CompactTime, ObjectKey)>,
    room: Room,
    /// Runs of the heaviest namespaces, found in one pass over the records: the next ones to
    /// let go of for room, so that a flood at the bound costs a pass per batch, not per run,
    /// also while a few namespaces tie at the top and take turns.
    to_let_go: HashMap<Arc<str>, Vec<ObjectKey>>,
    /// Passes over the records made to find runs to let go of.
    #[cfg(test)]
    pub(super) let_go_passes: usize,
}

impl Runs {
    /// No more than `max` records kept at once.
    pub(super) fn with_max(max: usize) -> Self {
        Self {
            room: Room::new(max),
            ..Self::default()
        }
    }

    pub(super) fn room(&self) -> &Room {
        &self.room
    }

    pub(super) fn room_mut(&mut self) -> &mut Room {
        &mut self.room
    }

    /// A run of `namespace` to let go of for room, if it has any.
    pub(super) fn one_to_let_go(&mut self, namespace: &Arc<str>) -> Option<ObjectKey> {
        for _pass in 0..2 {
            if let Some(keys) = self.to_let_go.get_mut(namespace) {
                while let Some(key) = keys.pop() {
                    if self.records.contains_key(&key) {
                        return Some(key);
                    }
                }
            }
            self.find_to_let_go(namespace);
        }
        None
    }

    /// One pass over the records for runs to let go of: of `namespace` and of the heaviest few.
    fn find_to_let_go(&mut self, namespace: &Arc<str>) {
        let mut wanted: HashMap<Arc<str>, Vec<ObjectKey>> = self
            .room
            .heaviest_few(LET_GO_NAMESPACES)
            .into_iter()
            .chain([namespace.clone()])
            .map(|heavy| (heavy, Vec::new()))
            .collect();
        for key in self.records.keys() {
            if let Some(keys) = wanted.get_mut(&key.namespace)
                && keys.len() < LET_GO_BATCH
            {
                keys.push(key.clone());
            }
        }
        self.to_let_go = wanted;
        #[cfg(test)]
        {
            self.let_go_passes += 1;
        }
    }

    pub(super) fn get(&self, key: &ObjectKey) -> Option<&Record> {
        self.records.get(key).map(|record| &**record)
    }

    /// A record to change; whatever changes its times must [`Runs::reschedule`] it after.
    pub(super) fn get_mut(&mut self, key: &ObjectKey) -> Option<&mut Record> {
        self.records.get_mut(key).map(|record| &mut **record)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Record)> {
        self.records.iter().map(|(key, record)| (key, &**record))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&ObjectKey, &mut Record)> {
        self.records
            .iter_mut()
            .map(|(key, record)| (key, &mut **record))
    }

    /// A list of `kind` begins: its runs are unlisted until sent again (a mark in each record:
    /// a set of 100,000 names would cost megabytes at the peak).
    pub(super) fn unlist(&mut self, kind: KindId) {
        for (key, record) in &mut self.records {
            if key.kind == kind {
                record.listed = false;
            }
        }
    }

    /// The runs of `kind` a list that ended did not send again.
    pub(super) fn unlisted(&self, kind: KindId) -> Vec<ObjectKey> {
        self.records
            .iter()
            .filter(|(key, record)| key.kind == kind && !record.listed)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// The records of `kind`, by key.
    pub(super) fn keys_of(&self, kind: KindId) -> Vec<ObjectKey> {
        self.records
            .keys()
            .filter(|key| key.kind == kind)
            .cloned()
            .collect()
    }

    /// Takes `key`'s record out, and out of the queue.
    pub(super) fn take(&mut self, key: &ObjectKey) -> Option<Box<Record>> {
        let record = self.records.remove(key)?;
        self.room.let_go(&key.namespace);
        if let Some(at) = record.queued {
            self.queue.remove(&(at, key.clone()));
        }
        Some(record)
    }

    /// Keeps `record` for `key` and queues it (no record of `key` may be kept already).
    pub(super) fn insert(&mut self, key: ObjectKey, record: Record) {
        if self.records.insert(key.clone(), Box::new(record)).is_none() {
            self.room.kept(&key.namespace);
        }
        self.reschedule(&key);
    }

    /// Puts `key`'s record in the queue at the time it next needs attention, if any.
    pub(super) fn reschedule(&mut self, key: &ObjectKey) {
        let Some(record) = self.records.get_mut(key) else {
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

    /// After its turn at `now`: what comes later (a deadline behind a stamp retry) waits in the
    /// queue again, unless a DELETE is on its way.
    pub(super) fn requeue_after(&mut self, key: &ObjectKey, now: Timestamp) {
        let Some(record) = self.records.get_mut(key) else {
            return;
        };
        if !record.pending
            && let Some(later) = record.wake_at(Some(now))
        {
            record.queued = Some(later);
            self.queue.insert((later, key.clone()));
        }
    }

    /// When the queue next has something, if anything.
    pub(super) fn next_wake(&self) -> Option<Timestamp> {
        self.queue.first().map(|(at, _)| at.get())
    }

    /// The next record whose time has come by `now`, out of the queue (stale entries skipped).
    pub(super) fn pop_due(&mut self, now: Timestamp) -> Option<ObjectKey> {
        while let Some((at, _)) = self.queue.first()
            && at.get() <= now
        {
            let (at, key) = self.queue.pop_first()?;
            if let Some(record) = self.records.get_mut(&key)
                && record.queued == Some(at)
            {
                record.queued = None;
                return Some(key);
            }
        }
        None
    }

    /// The runs `policy` governed wait to be judged afresh: no deadline until then.
    pub(super) fn release(&mut self, policy: &Arc<PolicyKey>) {
        let governed: Vec<ObjectKey> = self
            .records
            .iter()
            .filter(|(_, record)| record.policy.as_ref() == Some(policy))
            .map(|(key, _)| key.clone())
            .collect();
        for key in governed {
            if let Some(record) = self.records.get_mut(&key) {
                record.deadline = None;
                record.policy = None;
                // A dry run's deletion was only reported: nothing is in flight, and judged
                // afresh (dry run off, say) the object may go.
                if std::mem::take(&mut record.dry_run) {
                    record.pending = false;
                }
            }
            self.reschedule(&key);
        }
    }

    /// A `write` of `key` did not happen: it may be asked for again after its backoff, and a
    /// refusal that starts a longer wait is reported.
    pub(super) fn write_failed(
        &mut self,
        kinds: &Registry,
        key: &ObjectKey,
        write: Write,
        failure: Failure,
        now: Timestamp,
    ) -> Option<Action> {
        let record = self.records.get_mut(key)?;
        let warning = match write {
            Write::Delete => {
                record.pending = false;
                Warning::DeleteFailing
            }
            Write::Stamp => {
                record.forget_stamp_request();
                Warning::StampFailing
            }
        };
        let step = Step::take(&mut record.failures, &mut record.retry_at, failure, now);
        let uid = record.uid.text();
        self.reschedule(key);
        step.warning(kinds, key, &uid, warning)
    }
}

/// A write to a tracked run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    Delete,
    Stamp,
}
