//! Changes of intent at the last moment: a TTL extended, a TTL removed after the stamp and
//! `keep` added, each 100 ms before the deadline; and a finish time 60 s in the future (clock
//! skew), which waits, is reported once, and counts from that time.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{ApiResource, ListParams, Patch, PatchParams};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use super::{Form, Ledger, Row, report};
use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{
    create_buildrun, create_job_in, eventually, finish_buildrun, finish_job, now_second,
    sleep_until,
};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "chaos_ttl_extended_removed_or_kept_100ms_before_expiry",
            last_moment,
        ),
        env.trial(
            "chaos_a_finish_time_60s_in_the_future_waits_warns_once_and_deletes_on_time",
            clock_skew,
        ),
    ]
}

const TTL: SignedDuration = SignedDuration::from_secs(5);
const LAST_MOMENT: SignedDuration = SignedDuration::from_millis(100);

fn jobs_resource() -> ApiResource {
    ApiResource::erase::<Job>(&())
}

/// What one round showed: the objects that must stay, and those whose change reached the API
/// server only after their deadline (on a loaded machine), which prove nothing either way.
struct Round {
    must_stay: Vec<String>,
    inconclusive: usize,
}

/// Sends `patch`, and says whether it was answered before `deadline`.
async fn in_time<K>(
    api: &Api<K>,
    name: &str,
    patch: &Patch<Value>,
    deadline: Timestamp,
) -> Result<bool>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), patch).await?;
    Ok(Timestamp::now() < deadline)
}

/// One round: four runs finish together; just before their deadline one has its TTL doubled,
/// one its TTL removed (a BuildRun and a Job) and one is marked keep.
async fn round(ns: &TestNamespace, index: usize) -> Result<Round> {
    let client = &ns.env.client;
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let [extended, removed, removed_job, kept] =
        ["extended", "removed", "removed-job", "kept"].map(|what| format!("{what}-{index}"));
    let ttl = json!({"ttlAfterSucceeded": "5s"});
    create_buildrun(ns, &extended, "app", ttl.clone()).await?;
    create_buildrun(ns, &removed, "app", ttl).await?;
    let annotation = json!({"retention.dev/ttl-after-succeeded": "5s"});
    create_job_in(client, &ns.name, &removed_job, annotation.clone()).await?;
    create_job_in(client, &ns.name, &kept, annotation).await?;
    let finished = now_second();
    finish_buildrun(ns, &extended, true, finished).await?;
    finish_buildrun(ns, &removed, true, finished).await?;
    finish_job(client, &ns.name, &removed_job, true, finished).await?;
    finish_job(client, &ns.name, &kept, true, finished).await?;
    let deadline = finished + TTL;
    sleep_until(deadline - LAST_MOMENT).await;
    let [longer, no_ttl, no_annotation, keep]: [Patch<Value>; 4] = [
        json!({"spec": {"retention": {"ttlAfterSucceeded": "10s"}}}),
        json!({"spec": {"retention": null}}),
        json!({"metadata": {"annotations": {"retention.dev/ttl-after-succeeded": null}}}),
        json!({"metadata": {"annotations": {"retention.dev/keep": "true"}}}),
    ]
    .map(Patch::Merge);
    let (a, b, c, d) = tokio::join!(
        in_time(&runs, &extended, &longer, deadline),
        in_time(&runs, &removed, &no_ttl, deadline),
        in_time(&jobs, &removed_job, &no_annotation, deadline),
        in_time(&jobs, &kept, &keep, deadline),
    );
    let landed = [a?, b?, c?, d?];
    sleep_until(deadline + SignedDuration::from_secs(2)).await;
    let mut outcome = Round {
        must_stay: Vec::new(),
        inconclusive: landed.iter().filter(|in_time| !**in_time).count(),
    };
    for (name, in_time) in [(&extended, landed[0]), (&removed, landed[1])] {
        if in_time {
            ensure!(
                runs.get_opt(name).await?.is_some(),
                "{name} deleted against the change"
            );
        }
    }
    for (name, in_time) in [(&removed_job, landed[2]), (&kept, landed[3])] {
        if in_time {
            ensure!(
                jobs.get_opt(name).await?.is_some(),
                "{name} deleted against the change"
            );
        }
    }
    eventually(
        Duration::from_secs(4),
        "the extended run deleted at its new deadline",
        || async { Ok(runs.get_opt(&extended).await?.is_none()) },
    )
    .await?;
    for (name, in_time) in [
        (removed, landed[1]),
        (removed_job, landed[2]),
        (kept, landed[3]),
    ] {
        if in_time {
            outcome.must_stay.push(name);
        }
    }
    Ok(outcome)
}

async fn last_moment(ns: TestNamespace) -> Result<()> {
    let rounds = Form::current().pick(3, 30);
    let runs = shipwright("BuildRun");
    let run_ledger = Ledger::start(ns.dynamic(&runs), runs).await;
    let job_ledger = Ledger::start(ns.dynamic(&jobs_resource()), jobs_resource()).await;
    // Rounds overlap by starting a second apart, as a busy cluster would have them.
    let rounds = (0..rounds).map(|index| {
        let ns = ns.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(index as u64)).await;
            round(&ns, index).await
        }
    });
    let outcomes = futures::future::join_all(rounds).await;
    let mut must_stay = HashSet::new();
    let mut failures = Vec::new();
    let mut inconclusive = 0;
    for outcome in outcomes {
        match outcome {
            Ok(round) => {
                must_stay.extend(round.must_stay);
                inconclusive += round.inconclusive;
            }
            Err(error) => failures.push(format!("{error:#}")),
        }
    }
    if must_stay.is_empty() {
        failures.push("every change reached the API server after its deadline".into());
    }
    let combined = run_ledger
        .verdict(&must_stay)
        .await?
        .merge(job_ledger.verdict(&must_stay).await?);
    report(Row {
        scenario: "TTL extended / removed / keep added 100 ms before expiry",
        objects: combined.objects,
        wrong: combined.wrong.len() + failures.len(),
        missed: combined.missed.len(),
        p99_delay: combined.p99(),
        note: [
            format!("{} objects kept by a last-moment change", must_stay.len()),
            format!("{inconclusive} changes answered only after the deadline (not judged)"),
            combined.note(),
            failures.join("; "),
        ]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("; "),
    })
}

async fn clock_skew(ns: TestNamespace) -> Result<()> {
    let client = &ns.env.client;
    let ledger = Ledger::start(ns.dynamic(&jobs_resource()), jobs_resource()).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    create_job_in(
        client,
        &ns.name,
        "skewed",
        json!({"retention.dev/ttl-after-succeeded": "2s"}),
    )
    .await?;
    let finished = now_second() + SignedDuration::from_secs(60);
    finish_job(client, &ns.name, "skewed", true, finished).await?;
    let deadline = finished + SignedDuration::from_secs(2);
    // A later change makes the controller judge it again: still one report.
    tokio::time::sleep(Duration::from_secs(2)).await;
    jobs.patch(
        "skewed",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await?;
    sleep_until(deadline - SignedDuration::from_millis(500)).await;
    let early = jobs.get_opt("skewed").await?.is_none();
    eventually(
        Duration::from_secs(3),
        "the skewed Job deleted at finish + TTL",
        || async { Ok(jobs.get_opt("skewed").await?.is_none()) },
    )
    .await?;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let warnings: Vec<Event> = events
        .list(&ListParams::default().fields("involvedObject.name=skewed"))
        .await?
        .items
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some("RetentionFinishInFuture"))
        .collect();
    let count: i32 = warnings.iter().map(|event| event.count.unwrap_or(1)).sum();
    let verdict = ledger.verdict(&HashSet::new()).await?;
    let mut note = verdict.note();
    if early {
        note.push_str("deleted before finish + TTL; ");
    }
    if count != 1 {
        note.push_str(&format!("{count} RetentionFinishInFuture warnings, not 1"));
    }
    report(Row {
        scenario: "finish time 60 s in the future",
        objects: verdict.objects,
        wrong: verdict.wrong.len() + usize::from(early) + usize::from(count != 1),
        missed: verdict.missed.len(),
        p99_delay: verdict.p99(),
        note,
    })?;
    let first = warnings
        .first()
        .context("a RetentionFinishInFuture warning")?;
    ensure!(first.type_.as_deref() == Some("Warning"), "{first:?}");
    Ok(())
}
