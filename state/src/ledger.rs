//! What the deletion ledger says of a deletion the state decides, and of a notice: who decided,
//! with which setting and value, and the deadline — from the record, which keeps the deciding
//! setting only where a ledger sink is set (`State::with_ledger`, or the governing policy's
//! `spec.sink`). The executor adds what only it knows: the time, and with `archiveBeforeDelete`
//! the object's final state.

use kube_retention_common::kinds::Registry;
use kube_retention_common::ledger::{self, Entry};
use kube_retention_common::policies::Rules;
use kube_retention_common::progress::Outcome;

use jiff::Timestamp;

use super::action::Ledgered;
use super::keys::ObjectKey;
use super::policies::PolicyBook;
use super::record::Record;
use super::{EventTarget, Reason};

/// The rules of the policy governing `record`, if one does (where its `spec.sink` is).
pub(super) fn governing_rules<'a>(book: &'a PolicyBook, record: &Record) -> Option<&'a Rules> {
    book.get(record.policy.as_ref()?)?.valid_rules()
}

/// The ledger's account of deleting `record` for `reason`, under its policy's `rules`.
pub(super) fn deletion(
    rules: Option<&Rules>,
    record: &Record,
    reason: Reason,
    event_target: &EventTarget,
) -> Ledgered {
    let sink = rules.and_then(|rules| rules.sink.clone());
    let decided_by = match (&record.policy, reason) {
        (Some(policy), _) => policy.to_string(),
        (None, Reason::Ttl) => "its own settings".to_owned(),
        (None, Reason::Limit) => {
            format!("{} {}'s limits", event_target.kind, event_target.name)
        }
    };
    let setting = match reason {
        Reason::Ttl => record
            .decider()
            .and_then(|decider| ledger::setting(decider, record.policy.is_some())),
        Reason::Limit => record.outcome.map(|outcome| {
            let (field, limit) = match outcome {
                Outcome::Succeeded => ("succeededLimit", rules.and_then(|r| r.succeeded_limit)),
                Outcome::Failed => ("failedLimit", rules.and_then(|r| r.failed_limit)),
            };
            limit.map_or_else(|| field.to_owned(), |limit| format!("{field}: {limit}"))
        }),
    };
    Ledgered {
        decided_by,
        setting,
        deadline: record.deadline(),
        archive: sink.is_some() && rules.is_some_and(|rules| rules.archive_before_delete),
        sink,
    }
}

/// The `dev.retention.expiring` entry of `key`'s notice at `now`.
pub(super) fn expiring(
    kinds: &Registry,
    key: &ObjectKey,
    record: &Record,
    now: Timestamp,
) -> Entry {
    let resource = &kinds[key.kind].resource;
    Entry {
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        namespace: key.namespace.to_string(),
        name: key.name.to_string(),
        uid: record.uid.text().to_string(),
        reason: "ttl".to_owned(),
        decided_by: record
            .policy
            .as_ref()
            .map_or_else(|| "its own settings".to_owned(), ToString::to_string),
        setting: record
            .decider()
            .and_then(|decider| ledger::setting(decider, record.policy.is_some())),
        deadline: record.deadline(),
        time: now,
        object: None,
        object_truncated: false,
    }
}
