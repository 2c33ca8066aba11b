//! Deletion Events, aggregated: the deletions of one parent's runs (a Build's BuildRuns, a
//! CronJob's Jobs), or of one kind in a namespace for objects without a parent, within a short
//! window become one Event — "Deleted 37 BuildRuns of Build hello: their retention time passed:
//! hello-1, …" — so a burst of 10,000 deletions costs tens of Event requests, not thousands. A
//! group that holds a single deletion reads as before. Pure and clock-injected: the executor
//! feeds it and sends what falls due.

use std::collections::{BTreeSet, HashMap};

use jiff::{SignedDuration, Timestamp};

use kube_retention_state::{EventTarget, Reason};

/// The names an aggregated Event lists (the first in order) before "and N more".
const NAMES_LISTED: usize = 5;

/// One deletion to tell about.
#[derive(Debug, Clone)]
pub struct Notice {
    /// The parent, or the object itself when it has none.
    pub target: EventTarget,
    pub namespace: String,
    /// The deleted object's kind, e.g. `BuildRun`.
    pub kind: String,
    pub name: String,
    pub reason: Reason,
    /// Which policy decided, if one did (" (by RetentionPolicy ci/nightly)").
    pub by: String,
}

impl Notice {
    fn own(&self) -> bool {
        self.target.kind == self.kind && self.target.name == self.name
    }
}

/// An Event to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Digested {
    pub target: EventTarget,
    pub namespace: String,
    pub reason: &'static str,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    namespace: String,
    kind: String,
    /// The parent's kind and name; empty for objects without one.
    parent: (String, String),
    reason: Reason,
    by: String,
}

#[derive(Debug)]
struct Group {
    due: Timestamp,
    last: Notice,
    /// The first [`NAMES_LISTED`] names in order (deletions finish in any order).
    names: BTreeSet<String>,
    count: usize,
}

/// Deletions waiting for their window to close.
#[derive(Debug)]
pub struct Digest {
    window: SignedDuration,
    groups: HashMap<GroupKey, Group>,
}

impl Digest {
    /// Groups deletions over `window`; a zero window records each at once.
    pub fn new(window: SignedDuration) -> Self {
        Self {
            window,
            groups: HashMap::new(),
        }
    }

    /// Takes `notice` in; with a zero window its Event is due at once.
    pub fn add(&mut self, notice: Notice, now: Timestamp) -> Option<Digested> {
        if self.window.is_zero() {
            return Some(single(&notice));
        }
        let key = GroupKey {
            namespace: notice.namespace.clone(),
            kind: notice.kind.clone(),
            parent: if notice.own() {
                Default::default()
            } else {
                (notice.target.kind.clone(), notice.target.name.clone())
            },
            reason: notice.reason,
            by: notice.by.clone(),
        };
        let due = now + self.window;
        let group = self.groups.entry(key).or_insert_with(|| Group {
            due,
            last: notice.clone(),
            names: BTreeSet::new(),
            count: 0,
        });
        group.count += 1;
        group.names.insert(notice.name.clone());
        if group.names.len() > NAMES_LISTED {
            group.names.pop_last();
        }
        group.last = notice;
        None
    }

    /// When the next group's window closes.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.groups.values().map(|group| group.due).min()
    }

    /// The Events of every group whose window has closed by `now`.
    pub fn due(&mut self, now: Timestamp) -> Vec<Digested> {
        let closed: Vec<GroupKey> = self
            .groups
            .iter()
            .filter(|(_, group)| group.due <= now)
            .map(|(key, _)| key.clone())
            .collect();
        let mut events: Vec<Digested> = closed
            .into_iter()
            .filter_map(|key| self.groups.remove(&key))
            .map(|group| aggregated(&group))
            .collect();
        events.sort_by(|a, b| a.note.cmp(&b.note));
        events
    }
}

/// How a deletion for `reason` is told: the Event's reason, and why of one object and of several.
fn wording(reason: Reason) -> (&'static str, &'static str, &'static str) {
    match reason {
        Reason::Ttl => (
            "RetentionExpired",
            "its retention time passed",
            "their retention time passed",
        ),
        Reason::Limit => (
            "RetentionLimit",
            "it exceeded its history limit",
            "they exceeded their history limit",
        ),
    }
}

fn single(notice: &Notice) -> Digested {
    let (reason, why, _) = wording(notice.reason);
    Digested {
        target: notice.target.clone(),
        namespace: notice.namespace.clone(),
        reason,
        note: format!(
            "Deleted {} {}: {why}{}",
            notice.kind, notice.name, notice.by
        ),
    }
}

fn aggregated(group: &Group) -> Digested {
    let notice = &group.last;
    if group.count == 1 {
        return single(notice);
    }
    let (reason, _, why) = wording(notice.reason);
    let whose = if notice.own() {
        format!("in namespace {}", notice.namespace)
    } else {
        format!("of {} {}", notice.target.kind, notice.target.name)
    };
    let names: Vec<&str> = group.names.iter().map(String::as_str).collect();
    let more = group.count.saturating_sub(names.len());
    let listed = if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    };
    Digested {
        target: notice.target.clone(),
        namespace: notice.namespace.clone(),
        reason,
        note: format!(
            "Deleted {} {}s {whose}: {why}{}: {listed}",
            group.count, notice.kind, notice.by
        ),
    }
}
