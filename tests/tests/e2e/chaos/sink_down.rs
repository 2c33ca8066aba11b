//! The deletion ledger's sink down while a policy with `archiveBeforeDelete` has objects fall
//! due: 100 Jobs (1,000 in the long form) expire while the sink answers 503, for 15 s (30 s).
//! Nothing may be deleted during the outage, nor ever before the sink acknowledged the Job's
//! `dev.retention.deleted` event; after it, every Job goes.
//!
//! The judge's model rules on an object's own settings, not a policy's, so this scenario judges
//! by the ledger itself: a deletion is wrong without an acknowledgement of its uid before it
//! (the watch's deletion event after the sink's answer), and a Job still there well after the
//! outage is missed. The p99 delay runs from the end of the outage, not from the deadlines,
//! which all passed during it.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{ApiResource, ListParams};
use kube_retention_common::ledger::{DELETED, Entry};
use libtest_mimic::Trial;
use serde_json::json;

use super::{Form, Ledger, Row, report};
use crate::cleaners::sink::Sink;
use crate::support::{Env, TestNamespace};
use crate::workloads::{create_job_in, eventually_every, finish_job, now_second};

/// The scenario's name in docs/reliability.md: its own section there.
pub const SCENARIO: &str = "sink down during deletions with archiveBeforeDelete";
const PARALLEL: usize = 16;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "chaos_the_archive_sink_down_while_jobs_expire_nothing_deleted_unannounced",
        sink_down,
    )]
}

async fn sink_down(ns: TestNamespace) -> Result<()> {
    let form = Form::current();
    let count = form.pick(100, 1_000);
    let outage = Duration::from_secs(form.pick(15, 30));
    let resource = ApiResource::erase::<Job>(&());
    let ledger = Ledger::start(ns.dynamic(&resource), resource).await;
    let client = &ns.env.client;
    let names: Vec<String> = (0..count)
        .map(|index| format!("archived-{index}"))
        .collect();
    stream::iter(&names)
        .map(|name| create_job_in(client, &ns.name, name, json!({})))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    // The Jobs run (no deadline) until the outage has begun.
    let outage_ends = tokio::time::Instant::now() + outage;
    let outage_ends_at = Timestamp::now() + outage;
    let sink = Sink::down_until(outage_ends).await?;
    let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "archived", "namespace": ns.name},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "ttlAfterSucceeded": "1s", "sink": sink.url, "archiveBeforeDelete": true}});
    kube_retention_e2e::run_with_input(
        ns.kubectl().args(["apply", "-f", "-"]),
        &policy.to_string(),
    )?;
    let finished = now_second();
    stream::iter(&names)
        .map(|name| finish_job(client, &ns.name, name, true, finished))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let left =
        || async { Ok::<_, anyhow::Error>(jobs.list(&ListParams::default()).await?.items.len()) };
    let drain = Duration::from_secs(60 + count as u64 / 10);
    // Once a second: a list of every Job left is work for the API server the scenario measures.
    eventually_every(
        super::LIST_EVERY,
        outage + drain,
        "every Job deleted after the outage",
        || async { Ok(left().await? == 0) },
    )
    .await
    .ok();

    let acknowledged: HashMap<String, Timestamp> = sink
        .received()
        .into_iter()
        .filter(|received| received.headers.get("ce-type").map(String::as_str) == Some(DELETED))
        .filter_map(|received| {
            let entry: Entry = serde_json::from_value(received.body).ok()?;
            Some((entry.uid, received.at))
        })
        .collect();
    let deletions = ledger.deletions()?;
    let mut wrong = Vec::new();
    let mut delays = Vec::new();
    for (name, uid, at) in &deletions {
        match acknowledged.get(uid) {
            Some(acked) if acked <= at && *at >= outage_ends_at => {
                delays.push(at.duration_since(outage_ends_at).as_secs_f64());
            }
            _ => wrong.push(name.clone()),
        }
    }
    let missed = left().await?;
    delays.sort_by(f64::total_cmp);
    let p99 = delays
        .get(((delays.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied();
    let mut note = format!(
        "the sink answered 503 for {} s while all fell due ({} refusals); {} acknowledged, {} \
         deleted unannounced; p99 from the sink's return",
        outage.as_secs(),
        sink.refused(),
        acknowledged.len(),
        wrong.len()
    );
    if !wrong.is_empty() {
        note.push_str(&format!(
            "; wrong: {}",
            wrong.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    report(Row {
        scenario: SCENARIO,
        objects: count,
        wrong: wrong.len(),
        missed,
        p99_delay: p99,
        note,
    })
}
