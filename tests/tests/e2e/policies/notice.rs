//! Notices and snoozes on the real cluster: a policy's `notifyBefore` sends a `RetentionExpiring`
//! Warning on the object at its deadline less `notifyBefore` (within 2 s); `kubectl retention
//! snooze` pushes another object's deletion past its deadline, `explain` says so, its notice
//! comes again for the new deadline, and a user who may patch Jobs but not delete them cannot
//! take the snooze away (the webhook's writer check, reached through the old object's
//! annotations: the Job carries no other).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

use super::applied::apply;
use crate::plugin::kubectl;
use crate::support::TestNamespace;
use crate::workloads::{create_job_in, eventually, finish_job, now_second, sleep_until};
use crate::writers::{grant, kubectl_as, refusal};

const TTL: SignedDuration = SignedDuration::from_secs(20);
const NOTIFY_BEFORE: SignedDuration = SignedDuration::from_secs(10);
const SNOOZE: &str = "45s";
/// How far from its time a notice or a deletion may be seen (the bound).
const WITHIN: SignedDuration = SignedDuration::from_secs(2);

/// The notes of the `RetentionExpiring` Warnings on Job `name`.
async fn notices(events: &Api<Event>, name: &str) -> Result<Vec<String>> {
    let listed = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some("RetentionExpiring")
                && event.type_.as_deref() == Some("Warning")
        })
        .filter_map(|event| event.message)
        .collect())
}

/// Polls until Job `name` has a notice; when it was first seen, and its note.
async fn first_notice(
    events: &Api<Event>,
    name: &str,
    by: Timestamp,
) -> Result<(Timestamp, String)> {
    loop {
        if let Some(note) = notices(events, name).await?.into_iter().next() {
            return Ok((Timestamp::now(), note));
        }
        ensure!(
            Timestamp::now() < by,
            "no RetentionExpiring notice on {name} by {by}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn near(seen: Timestamp, expected: Timestamp, what: &str) -> Result<()> {
    let off = seen.duration_since(expected);
    ensure!(
        off.abs() <= WITHIN,
        "{what} at {seen}, {off:?} from {expected} (allowed ±{WITHIN:?})"
    );
    Ok(())
}

pub async fn notice_and_snooze(ns: TestNamespace) -> Result<()> {
    apply(
        &ns,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": "noticed", "namespace": ns.name},
            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                     "ttlAfterSucceeded": "20s", "notifyBefore": "10s"}}),
    )?;
    let client = &ns.env.client;
    for name in ["warned", "snoozed"] {
        create_job_in(client, &ns.name, name, json!({})).await?;
    }
    let finished = now_second();
    for name in ["warned", "snoozed"] {
        finish_job(client, &ns.name, name, true, finished).await?;
    }
    let deadline = finished + TTL;

    let snoozing = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "snooze",
        "job/snoozed",
        SNOOZE,
        "-n",
        &ns.name,
    ]))?;
    ensure!(
        snoozing.starts_with(&format!("snoozed job/snoozed in {} until ", ns.name)),
        "{snoozing}"
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let until: Timestamp = jobs
        .get("snoozed")
        .await?
        .metadata
        .annotations
        .and_then(|annotations| annotations.get("retention.dev/snoozed-until").cloned())
        .context("the snooze's annotation")?
        .parse()?;
    ensure!(
        snoozing.contains(&format!("is deleted at {until} at the earliest")),
        "{snoozing}"
    );
    let explained: Value = serde_json::from_str(&kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "explain",
        "job",
        "snoozed",
        "-n",
        &ns.name,
        "-o",
        "json",
    ]))?)?;
    ensure!(
        explained["deadline"] == json!(until.to_string())
            && explained["snoozedUntil"] == json!(until.to_string())
            && explained["noticeAt"] == json!((until - NOTIFY_BEFORE).to_string()),
        "explain says the snooze and the notice: {explained}"
    );

    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let notice_at = deadline - NOTIFY_BEFORE;
    let (seen, note) = first_notice(&events, "warned", notice_at + WITHIN).await?;
    near(seen, notice_at, "the notice")?;
    ensure!(
        note.contains(&format!("kube-retention deletes it at {deadline}"))
            && note.contains(&format!("by RetentionPolicy {}/noticed", ns.name))
            && note.contains(&format!(
                "kubectl retention snooze job/warned -n {}",
                ns.name
            )),
        "{note}"
    );
    eventually(
        Duration::from_secs(15),
        "the warned Job deleted at its deadline",
        || async { Ok(jobs.get_opt("warned").await?.is_none()) },
    )
    .await?;
    near(Timestamp::now(), deadline, "the warned Job's deletion")?;

    // Past the policy's deadline, the snoozed Job stays, noticed for that deadline never.
    sleep_until(deadline + WITHIN).await;
    ensure!(
        jobs.get_opt("snoozed").await?.is_some(),
        "the snoozed Job was deleted at the policy's deadline"
    );
    ensure!(
        notices(&events, "snoozed").await?.is_empty(),
        "a notice for a deadline the snooze pushed away"
    );

    // Taking the snooze away is a tightening: refused to a user who may not delete the Job.
    let user = format!("snooze-taker-{}", ns.name);
    grant(
        &ns,
        "patch-jobs",
        &user,
        "batch",
        "jobs",
        "get, list, patch, update",
    )?;
    let stderr = refusal(
        kubectl_as(&ns, &user).args(["annotate", "job/snoozed", "retention.dev/snoozed-until-"]),
        "",
    )?
    .context("a snooze taken away by a user who may not delete the Job")?;
    ensure!(
        stderr.contains(&format!(
            "metadata.annotations[retention.dev/snoozed-until]: null you may not delete jobs.batch in namespace {}",
            ns.name
        )),
        "{stderr}"
    );

    let (seen, note) = first_notice(&events, "snoozed", until - NOTIFY_BEFORE + WITHIN).await?;
    near(seen, until - NOTIFY_BEFORE, "the snoozed Job's notice")?;
    ensure!(note.contains(&format!("deletes it at {until}")), "{note}");
    eventually(
        Duration::from_secs(15),
        "the snoozed Job deleted at the end of its snooze",
        || async { Ok(jobs.get_opt("snoozed").await?.is_none()) },
    )
    .await?;
    near(Timestamp::now(), until, "the snoozed Job's deletion")
}
