//! Cleaning a group, in an order that never leaves it half-done for a reason known in advance:
//! the Helm release is read first (a release with delete hooks, with objects outside the
//! Cleaner's namespace or of kinds a Cleaner does not uninstall, refuses the whole clean:
//! [`kube_retention_helm::uninstall`]), then the blast-radius guard counts what the clean would
//! delete (more than `--max-immediate-deletions`, and the Cleaner's generation not approved,
//! holds it whole: [`Problem::AwaitingApproval`]), then the targets are deleted with uid
//! preconditions, the
//! release uninstalled, the CloudEvent handed to the ledger's lanes, and the Cleaner deletes
//! itself.
//! Each DELETE goes through [`super::deleting`]: it waits for the controller's request budget,
//! the one the executor's deletions spend, and for the circuit breaker, which counts it and holds
//! it while open.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube_retention_common::cleaner::Cleaner;
use kube_retention_io::lean::LeanObject;
use serde_json::json;

use super::book::{Clean, CleanerKey, Doomed};
pub use super::deleting::{Cleaned, Cleaning, Sent};
use super::status::Problem;
use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_helm::uninstall::Deleter;
use kube_retention_helm::uninstall::{self, Release};
use kube_retention_sinks::{self as sinks, Undelivered};

/// Cleans `clean`'s group; a failure leaves the Cleaner to be evaluated again.
pub async fn clean(cleaning: Arc<Cleaning>, clean: Clean) -> Result<Cleaned, Problem> {
    let failed = |error: kube::Error| Problem::CleanFailed(error.to_string());
    let namespace = clean.cleaner.namespace.clone();
    let release = match &clean.release {
        Some(name) => Some(uninstall::read(&*cleaning, name, &namespace).await?),
        None => None,
    };
    let deletions = clean.objects.len() + release.as_ref().map_or(0, Release::deletions);
    guard(&cleaning, &clean, deletions)?;
    let mut cleaned = Cleaned::default();
    for doomed in &clean.objects {
        if delete(&cleaning, doomed).await.map_err(failed)? {
            cleaning.metrics.deleted("object");
            let entry = ledger_entry(&clean.cleaner, doomed, cleaning.clock.now());
            cleaning.ledger.announce(DELETED, &entry, None, false);
            cleaned
                .deleted
                .push(format!("{}/{}", doomed.resource.kind, doomed.name));
        }
    }
    if let Some(release) = release {
        let uninstalled = uninstall::uninstall(&*cleaning, release, &namespace).await?;
        cleaned.deleted.extend(uninstalled.deleted);
        cleaned.skipped.extend(uninstalled.skipped);
        if uninstalled.release.is_some() {
            cleaning.metrics.deleted("release");
        }
        cleaned.release = uninstalled.release;
    }
    Ok(cleaned)
}

/// The blast-radius guard, as for a policy's new generation: a clean that would send more than
/// `--max-immediate-deletions` DELETEs (its targets, and a release's objects and records) waits
/// until its generation is approved; one within it, or approved, goes.
fn guard(cleaning: &Cleaning, clean: &Clean, deletions: usize) -> Result<(), Problem> {
    let threshold = cleaning.max_immediate_deletions;
    let within = threshold == 0 || deletions <= usize::try_from(threshold).unwrap_or(usize::MAX);
    if within || clean.approved {
        return Ok(());
    }
    Err(Problem::AwaitingApproval {
        deletions,
        threshold,
        generation: clean.generation.unwrap_or_default(),
        namespace: clean.cleaner.namespace.clone(),
        name: clean.cleaner.name.clone(),
    })
}

/// The ledger's entry for `doomed`, deleted by `cleaner` at `now`.
fn ledger_entry(cleaner: &CleanerKey, doomed: &Doomed, now: jiff::Timestamp) -> Entry {
    Entry {
        api_version: doomed.resource.api_version.clone(),
        kind: doomed.resource.kind.clone(),
        namespace: doomed.namespace.clone(),
        name: doomed.name.clone(),
        uid: doomed.uid.clone(),
        reason: "cleaner".to_owned(),
        decided_by: format!("Cleaner {cleaner}"),
        setting: None,
        deadline: None,
        time: now,
        object: None,
        object_truncated: false,
    }
}

/// Deletes exactly `doomed` ([`Deleter::delete`]); false when it was already gone (404) or
/// replaced by a namesake (409), which are not failures.
async fn delete(cleaning: &Cleaning, doomed: &Doomed) -> kube::Result<bool> {
    // Its answer decoded lean: within the bound of what an object holds (`io/src/lean.rs`).
    let api: Api<LeanObject> =
        Api::namespaced_with(cleaning.client.clone(), &doomed.namespace, &doomed.resource);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(doomed.uid.clone()),
            resource_version: None,
        }),
        propagation_policy: Some(cleaning.propagation.clone()),
        ..DeleteParams::default()
    };
    Ok(cleaning.delete(&api, &doomed.name, &params).await? == Sent::Deleted)
}

/// Hands the CloudEvent to the ledger's lanes as work of the Cleaner's namespace (bounded and
/// fair between namespaces and sinks, no task of its own); a refusal or a failure is counted and
/// reported on the Cleaner (what the Event says: [`Undelivered::note`]).
pub fn announce(cleaning: Arc<Cleaning>, clean: &Clean, cleaned: &Cleaned) {
    let Some(sink) = clean.sink.clone() else {
        return;
    };
    let key = &clean.cleaner;
    let source = format!(
        "/apis/retention.dev/v1alpha1/namespaces/{}/cleaners/{}",
        key.namespace, key.name
    );
    let data = json!({
        "cleaner": {"namespace": key.namespace, "name": key.name, "uid": clean.uid},
        "deleted": cleaned.deleted,
        "release": cleaned.release,
        "skipped": cleaned.skipped,
    });
    let reference = reference(clean);
    let event = sinks::event(
        kube_retention_common::cleaner::EVENT_TYPE,
        &uuid::Uuid::new_v4().to_string(),
        &source,
        data,
        cleaning.clock.now(),
    );
    let event = match event {
        Ok(event) => event,
        Err(error) => {
            let undelivered = Undelivered::Unsendable(error.to_string());
            report(cleaning, reference, &sink, undelivered);
            return;
        }
    };
    let ledger = cleaning.ledger.clone();
    let reporting = sink.clone();
    let done = Box::new(move |delivered: Result<(), Undelivered>| {
        if let Err(undelivered) = delivered {
            report(cleaning, reference, &reporting, undelivered);
        }
    });
    ledger.send(&key.namespace, &sink, event, done);
}

/// Counts `undelivered` and records it on the Cleaner `reference` names, in a task of its own:
/// one Event each, as deliveries end (a bounded number at a time, [`Ledger`]'s).
///
/// [`Ledger`]: kube_retention_sinks::ledger::Ledger
fn report(
    cleaning: Arc<Cleaning>,
    reference: ObjectReference,
    sink: &str,
    undelivered: Undelivered,
) {
    let reason = match &undelivered {
        Undelivered::Refused(refusal) => {
            tracing::warn!(%sink, %refusal, "CloudEvent refused by the sink policy");
            cleaning.metrics.sink_refused.inc();
            "SinkRefused"
        }
        Undelivered::Failed { .. } | Undelivered::Unsendable(_) => {
            tracing::warn!(%sink, ?undelivered, "CloudEvent not delivered");
            cleaning.metrics.sink_failures.inc();
            "SinkFailed"
        }
    };
    let note = undelivered.note(sink);
    tokio::spawn(async move {
        record(&cleaning, &reference, EventType::Warning, reason, note).await;
    });
}

/// Deletes the Cleaner itself, exactly this one.
pub async fn retire(cleaning: &Cleaning, clean: &Clean) -> kube::Result<()> {
    let api: Api<Cleaner> = Api::namespaced(cleaning.client.clone(), &clean.cleaner.namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(clean.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    cleaning.delete(&api, &clean.cleaner.name, &params).await?;
    Ok(())
}

pub fn reference(clean: &Clean) -> ObjectReference {
    ObjectReference {
        api_version: Some(Cleaner::api_version(&()).into_owned()),
        kind: Some(Cleaner::kind(&()).into_owned()),
        namespace: Some(clean.cleaner.namespace.clone()),
        name: Some(clean.cleaner.name.clone()),
        uid: Some(clean.uid.clone()),
        ..ObjectReference::default()
    }
}

pub async fn record(
    cleaning: &Cleaning,
    reference: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Clean".into(),
        secondary: None,
    };
    if let Err(error) = cleaning.recorder.publish(&event, reference).await {
        tracing::warn!(%error, "could not record an Event");
    }
}
