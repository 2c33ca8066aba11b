//! What a watched run becomes in the state: its compact [`Record`] (deadline, stamp to write,
//! limits group, owner for Events), carried over from the record of the version seen before
//! where that history still stands, and a Warning when it claims to have finished in the future.

use compact_str::CompactString;
use jiff::{SignedDuration, Timestamp};
use kube::api::DynamicObject;
use kube_retention_common::kinds::{Entry, Registry, Role};
use kube_retention_common::{Expiry, Progress};
use serde_json::Value;

use super::compact::CompactTime;
use super::failures::object_target;
use super::governing::Governed;
use super::keys::ObjectKey;
use super::notice::Notice;
use super::record::{Announcements, Kept, Record, Stamps, Uid};
use super::seen::Seen;
use super::{Action, EventTarget, Warning};

/// Which of its stamps the controller writes itself (`--stamp`). The webhook's stamp at admission
/// costs no request of its own (it is part of the writer's); the controller's costs a PATCH per
/// object that finishes after it was admitted, as many writes as the deletions themselves, so
/// it is asked for, not the default: a tool that keeps etcd small does not double its writes
/// unasked, and a burst of them drains the request budget the deletions due next need
/// (docs/benchmarks/peers.md measured a second lost at 10,000 Jobs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stamping {
    /// A finished object's deadline from its own settings, written as
    /// `retention.dev/expires-at`, and a stamp that no longer applies taken away: the schedule
    /// is on the object. Two requests per deletion where the webhook could not stamp.
    Finished,
    /// None: one request per deletion, the DELETE. A stamp left behind is never acted on (it is
    /// kube-retention's own, told apart from a user's `expires-at`); `kubectl retention explain`
    /// and `upcoming` tell the deadlines.
    #[default]
    Never,
}

/// A finish time further ahead than this is reported as clock skew.
const SKEW_TOLERANCE: SignedDuration = SignedDuration::from_secs(1);

/// The record of `seen` (of the kind `entry`) as `governed`, after `previous`, keeping the
/// setting that decided where a `ledger` sink or its policy's announces its deletion; and the
/// finish time it claims, where that lies in the future.
pub(super) fn record_of(
    seen: &Seen<'_>,
    entry: &Entry,
    governed: &Governed,
    previous: Option<&Record>,
    stamping: Stamping,
    ledger: bool,
    now: Timestamp,
) -> (Record, Option<Timestamp>) {
    let object = seen.object;
    let created = seen.created();
    let progress = governed.judgement.progress;
    let own = &governed.judgement.own;
    let deadline = match progress {
        Progress::Running => None,
        Progress::Finished(_) | Progress::NotARun => governed.judgement.expiry.deadline(),
    };
    // kube-retention's stamp tells the object's own settings, never a policy's.
    let stamp = match stamping {
        Stamping::Finished => {
            Expiry::compute(own, created, progress, now).stamp_change(&own.annotations)
        }
        Stamping::Never => None,
    };
    let future_finish = progress
        .finished()
        .and_then(|finished| finished.at)
        .filter(|at| *at > now + SKEW_TOLERANCE);
    let resource_version: CompactString = object
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .into();
    let uid = Uid::new(object.metadata.uid.as_deref().unwrap_or_default());
    // The same object, unchanged since it was last seen (a relist): its history stands.
    let same = previous
        .filter(|previous| previous.resource_version == resource_version && previous.uid == uid);
    let same_object = previous.filter(|previous| previous.uid == uid);
    let stamps = Stamps {
        needed: stamp,
        requested: same_object.and_then(|previous| previous.stamps().requested),
    };
    let notice = Notice::new(
        governed.judgement.notice_at(),
        deadline,
        same_object.and_then(Record::notice),
    );
    let group = group_of(object, seen.value, &entry.role)
        .or(governed.group.as_ref().map(|(name, _)| name.clone()));
    let record = Record {
        uid,
        resource_version,
        created: created.unwrap_or(now).into(),
        deadline: deadline.map(CompactTime::new),
        retry_at: same.and_then(|previous| previous.retry_at),
        queued: None,
        announcements: Announcements {
            stamps,
            notice,
            decider: governed
                .judgement
                .decider
                .filter(|_| ledger || governed.announced),
        }
        .boxed(),
        group,
        owner: owner_of(object, &entry.role),
        policy: governed.policy.clone(),
        outcome: progress.finished().map(|finished| finished.outcome),
        failures: same.map_or(0, |previous| previous.failures),
        kept: match (own.annotations.keep, governed.judgement.on_hold) {
            (true, _) => Kept::Annotated,
            (false, true) => Kept::OnHold,
            (false, false) => Kept::No,
        },
        deleting: object.metadata.deletion_timestamp.is_some(),
        pending: same.is_some_and(|previous| previous.pending),
        skew_reported: same_object.is_some_and(|previous| previous.skew_reported)
            || future_finish.is_some(),
        dry_run: governed.dry_run,
        listed: true,
    };
    let unreported = future_finish.filter(|_| !same_object.is_some_and(|p| p.skew_reported));
    (record, unreported)
}

/// Whether `record` counts differently for limits than `previous` did.
pub(super) fn changed_for_limits(previous: Option<&Record>, record: &Record) -> bool {
    previous.is_none_or(|previous| {
        previous.outcome != record.outcome
            || previous.kept != record.kept
            || previous.deleting != record.deleting
            || previous.group != record.group
    })
}

/// The Warning for a run that says it `finished_at` a time still ahead of `now`.
pub(super) fn skew_warning(
    kinds: &Registry,
    key: &ObjectKey,
    record: &Record,
    finished_at: Timestamp,
    now: Timestamp,
) -> Action {
    tracing::warn!(namespace = %key.namespace, name = %key.name, %finished_at, "finish time is in the future (clock skew?); waiting");
    Action::Warn {
        key: key.clone(),
        target: object_target(kinds, key, &record.uid.text()),
        warning: Warning::FinishInFuture,
        note: format!(
            "finished at {finished_at}, {}s ahead of kube-retention's clock (clock skew?): \
             its TTL counts from that time",
            finished_at.duration_since(now).as_secs()
        ),
    }
}

/// The name of the parent (or the label value) whose limits a run counts against.
fn group_of(object: &DynamicObject, value: &Value, role: &Role) -> Option<CompactString> {
    match role {
        Role::Run {
            parent: Some(parent),
            ..
        } => parent.name_in(value).map(CompactString::from),
        Role::Run {
            limits: Some(limits),
            ..
        } => object
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(&limits.label))
            .map(|value| value.as_str().into()),
        Role::Run { .. } | Role::Parent | Role::Object => None,
    }
}

/// The first owner, where a run has no parent kind of its own to record Events on.
fn owner_of(object: &DynamicObject, role: &Role) -> Option<Box<EventTarget>> {
    if let Role::Run {
        parent: Some(_), ..
    } = role
    {
        return None;
    }
    let owner = object.metadata.owner_references.as_ref()?.first()?;
    Some(Box::new(EventTarget {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: Some(owner.uid.clone()),
    }))
}
