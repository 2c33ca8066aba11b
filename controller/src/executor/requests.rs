//! The API requests behind each action, and what their outcomes mean for the state.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube_retention_common::StampChange;
use kube_retention_common::annotations::{EXPIRES_AT, MANAGED_LABEL, STAMPED};
use kube_retention_common::expiry::format_timestamp;
use kube_retention_common::kinds::Resource;
use kube_retention_io::lean::LeanObject;
use serde_json::{Value, json};

use super::digest::Notice;
use super::{EventWork, Feedback, Shared};
use crate::metrics::{DeletionLabels, ErrorLabels, KindLabels};
use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_sinks::ledger::archive::Archived;
use kube_retention_state::{Action, Failure, Ledgered, ObjectKey, Reason};

/// The API of `key`'s kind in its namespace, its answers decoded lean: within the bound of what
/// an object holds (`io/src/lean.rs`), however the object changed since it was judged.
fn api(shared: &Shared, key: &ObjectKey, resource: &Resource) -> Api<LeanObject> {
    let resource = resource.api_resource();
    Api::namespaced_with(shared.parts.client.clone(), &key.namespace, &resource)
}

/// What a failed request means: `None` when the object is gone (nothing left to do).
fn failure(
    shared: &Shared,
    key: &ObjectKey,
    resource: &Resource,
    operation: &'static str,
    error: kube::Error,
) -> Option<Failure> {
    // The kind as metrics and logs name it (`Job.batch`).
    let kind = resource.to_string();
    match error {
        kube::Error::Api(status) if status.code == 404 => None,
        kube::Error::Api(status) if status.code == 409 => {
            if operation == "delete" {
                shared
                    .parts
                    .metrics
                    .conflicts
                    .get_or_create(&KindLabels { kind })
                    .inc();
            }
            Some(Failure::Conflict)
        }
        error => {
            tracing::warn!(kind = %kind, namespace = %key.namespace, name = %key.name, operation, %error, "request failed; backing off");
            shared
                .parts
                .metrics
                .errors
                .get_or_create(&ErrorLabels { kind, operation })
                .inc();
            let unavailable = match &error {
                kube::Error::Api(status) => status.code == 429 || status.code >= 500,
                _ => true,
            };
            // The server's own sentence, not the whole Status: Event notes are capped.
            let message = match &error {
                kube::Error::Api(status) => status.message.clone(),
                other => other.to_string(),
            };
            Some(if unavailable {
                Failure::Unavailable(message)
            } else {
                Failure::Error(message)
            })
        }
    }
}

pub(super) async fn delete(shared: &Shared, action: Action, resource: &Resource) {
    let Action::Delete {
        key,
        uid,
        resource_version,
        reason,
        eligible_at,
        event_target,
        policy,
        ledger,
    } = action
    else {
        return;
    };
    let kind = resource.to_string();
    let entry = ledger.as_deref().map(|ledgered| {
        ledger_entry(
            &key,
            resource,
            &uid,
            reason,
            ledgered,
            shared.parts.clock.now(),
        )
    });
    let archive_sink = ledger
        .as_deref()
        .filter(|ledgered| ledgered.archive)
        .and_then(|ledgered| ledgered.sink.clone());
    if let (Some(sink), Some(entry)) = (&archive_sink, &entry) {
        let judged = (uid.as_str(), resource_version.as_str());
        if let Err(failure) = archive(shared, &key, resource, judged, sink, entry).await {
            if let Some(failure) = failure {
                let feedback = Feedback::DeleteFailed { key, failure };
                shared.parts.feedback.send(feedback).ok();
            }
            return;
        }
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: Some(resource_version.to_string()),
        }),
        propagation_policy: Some(shared.parts.settings.propagation.clone()),
        ..DeleteParams::default()
    };
    if let Err(error) = api(shared, &key, resource).delete(&key.name, &params).await {
        if let Some(failure) = failure(shared, &key, resource, "delete", error) {
            let feedback = Feedback::DeleteFailed { key, failure };
            shared.parts.feedback.send(feedback).ok();
        }
        return;
    }
    let metrics = &shared.parts.metrics;
    let delay = shared
        .parts
        .clock
        .now()
        .duration_since(eligible_at)
        .as_secs_f64()
        .max(0.0);
    let reason_label = reason_label(reason);
    metrics
        .deletions
        .get_or_create(&DeletionLabels {
            kind: kind.clone(),
            reason: reason_label,
        })
        .inc();
    metrics.deletion_delay.observe(delay);
    let by = policy
        .as_ref()
        .map(|governance| format!(" ({governance})"))
        .unwrap_or_default();
    tracing::info!(kind = %kind, namespace = %key.namespace, name = %key.name, reason = reason_label, delay_seconds = delay, policy = %by, "deleted");
    if let (Some(shared_ledger), Some(mut entry), Some(ledgered)) =
        (&shared.parts.ledger, entry, ledger.as_deref())
    {
        entry.time = shared.parts.clock.now();
        shared_ledger.announce(DELETED, &entry, ledgered.sink.as_ref(), ledgered.archive);
    }
    if let Some(governance) = policy {
        let feedback = Feedback::Deleted {
            policy: governance.policy,
        };
        shared.parts.feedback.send(feedback).ok();
    }
    if shared.parts.settings.events {
        let notice = Notice {
            target: event_target,
            namespace: key.namespace.to_string(),
            kind: resource.kind.clone(),
            name: key.name.to_string(),
            reason,
            by,
        };
        shared.notices.send(notice).ok();
    }
}

fn reason_label(reason: Reason) -> &'static str {
    match reason {
        Reason::Ttl => "ttl",
        Reason::Limit => "limit",
    }
}

/// The ledger's entry for deleting `key`, as `ledgered` tells it, at `now`; its time is set
/// again when sent.
fn ledger_entry(
    key: &ObjectKey,
    resource: &Resource,
    uid: &str,
    reason: Reason,
    ledgered: &Ledgered,
    now: Timestamp,
) -> Entry {
    Entry {
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        namespace: key.namespace.to_string(),
        name: key.name.to_string(),
        uid: uid.to_owned(),
        reason: reason_label(reason).to_owned(),
        decided_by: ledgered.decided_by.clone(),
        setting: ledgered.setting.clone(),
        deadline: ledgered.deadline,
        time: now,
        object: None,
        object_truncated: false,
    }
}

/// Archives `key` to `sink` before its DELETE (`archiveBeforeDelete`): `Ok` to go on, else
/// the failure to back off with (`None`: the object is gone, nothing to do).
async fn archive(
    shared: &Shared,
    key: &ObjectKey,
    resource: &Resource,
    judged: (&str, &str),
    sink: &str,
    entry: &Entry,
) -> Result<(), Option<Failure>> {
    let Some(ledger) = &shared.parts.ledger else {
        let message = "no deletion ledger to archive it with".to_owned();
        return Err(Some(Failure::Unavailable(message)));
    };
    let api = api(shared, key, resource);
    let archived = ledger
        .archiver
        .archive(&api, resource, &key.name, judged, sink, entry.clone())
        .await;
    match archived {
        Archived::Acknowledged => Ok(()),
        Archived::Gone => Err(None),
        Archived::Changed => Err(Some(Failure::Conflict)),
        Archived::Unread(error) => Err(failure(shared, key, resource, "get", error)),
        Archived::Failed(note) => {
            ledger.metrics.archive_failures.inc();
            tracing::warn!(kind = %resource, namespace = %key.namespace, name = %key.name, %note, "not archived: the deletion waits");
            Err(Some(Failure::Unavailable(format!(
                "archiveBeforeDelete: not deleted until the sink acknowledges it: {note}"
            ))))
        }
    }
}

pub(super) async fn stamp(
    shared: &Shared,
    key: ObjectKey,
    resource: &Resource,
    change: StampChange,
    resource_version: &str,
) {
    let patch = match change {
        StampChange::Set(at) => {
            let stamp = format_timestamp(at);
            json!({"metadata": {"annotations": {EXPIRES_AT: stamp, STAMPED: stamp}}})
        }
        // Carrying resourceVersion makes the patch conditional: it removes the stamp from the
        // version judged stale, never from one a user has changed since.
        StampChange::Remove(_) => json!({"metadata": {
            "resourceVersion": resource_version,
            "annotations": {EXPIRES_AT: Value::Null, STAMPED: Value::Null}}}),
    };
    match merge_patch(shared, &key, resource, &patch).await {
        Ok(()) => {
            let kind = resource.to_string();
            shared
                .parts
                .metrics
                .stamps
                .get_or_create(&KindLabels { kind })
                .inc();
        }
        Err(error) => {
            if let Some(failure) = failure(shared, &key, resource, "patch", error) {
                let feedback = Feedback::StampFailed { key, failure };
                shared.parts.feedback.send(feedback).ok();
            }
        }
    }
}

pub(super) async fn label(shared: &Shared, key: ObjectKey, resource: &Resource) {
    let patch = json!({"metadata": {"labels": {MANAGED_LABEL: "true"}}});
    match merge_patch(shared, &key, resource, &patch).await {
        Ok(()) => {
            let kind = resource.to_string();
            tracing::info!(kind = %kind, namespace = %key.namespace, name = %key.name, "labelled an object the webhook never saw");
            shared.parts.metrics.labelled.inc();
        }
        Err(error) => {
            if let Some(failure) = failure(shared, &key, resource, "label", error) {
                let feedback = Feedback::LabelFailed { key, failure };
                shared.parts.feedback.send(feedback).ok();
            }
        }
    }
}

async fn merge_patch(
    shared: &Shared,
    key: &ObjectKey,
    resource: &Resource,
    patch: &Value,
) -> kube::Result<()> {
    api(shared, key, resource)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

pub(super) async fn record(shared: &Shared, work: EventWork) {
    let reference = ObjectReference {
        api_version: Some(work.target.api_version),
        kind: Some(work.target.kind),
        name: Some(work.target.name),
        namespace: Some(work.namespace),
        uid: work.target.uid,
        ..ObjectReference::default()
    };
    let event = Event {
        type_: work.type_,
        reason: work.reason.into(),
        note: Some(within_event_limit(work.note)),
        action: work.action.into(),
        secondary: None,
    };
    let warning = matches!(event.type_, EventType::Warning);
    match shared.parts.recorder.publish(&event, &reference).await {
        // A Warning is about one object, one at a time: said, as its deletion is.
        Ok(()) if warning => tracing::info!(
            namespace = reference.namespace.as_deref().unwrap_or_default(),
            name = reference.name.as_deref().unwrap_or_default(),
            reason = %event.reason,
            "warned"
        ),
        Ok(()) => {}
        Err(error) => {
            tracing::warn!(%error, "could not record an Event");
            shared
                .parts
                .metrics
                .errors
                .get_or_create(&ErrorLabels {
                    kind: "Event".into(),
                    operation: "create",
                })
                .inc();
        }
    }
}

/// The API server refuses Event notes over 1024 bytes: cut longer ones at a character boundary.
fn within_event_limit(mut note: String) -> String {
    const LIMIT: usize = 1024;
    if note.len() > LIMIT {
        let mut end = LIMIT - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

#[cfg(test)]
mod tests {
    use super::within_event_limit;

    #[test]
    fn event_notes_fit_the_api_servers_limit() {
        assert_eq!(within_event_limit("short".into()), "short");
        let long = within_event_limit("é".repeat(2000));
        assert!(long.len() <= 1024 && long.ends_with('…'), "{}", long.len());
    }
}
