//! The same name finished, then deleted and re-created unfinished, over and over, under a TTL of
//! 1 s: the re-created run must never go with its predecessor's deadline, and every run left
//! alone must go on time.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, Preconditions, ResourceExt};
use libtest_mimic::Trial;
use serde_json::json;

use super::{Form, Ledger, Row, report};
use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{create_buildrun, eventually, finish_buildrun, now_second, sleep_until};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "chaos_same_name_finished_then_recreated_unfinished_under_a_1s_ttl",
        recreated,
    )]
}

/// A jitter from a cheap generator: the suite needs spread, not cryptography.
pub fn jitter(seed: &mut u64, range_ms: u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    Duration::from_millis(*seed % range_ms.max(1))
}

async fn recreated(ns: TestNamespace) -> Result<()> {
    let form = Form::current();
    let (iterations, names) = form.pick((50, 10), (1000, 20));
    let resource = shipwright("BuildRun");
    let ledger = Ledger::start(ns.dynamic(&resource), resource).await;
    let rounds = (0..names).map(|lane| lane_rounds(&ns, &ledger, lane, iterations / names));
    let outcomes = futures::future::join_all(rounds).await;
    let survived_errors: Vec<String> = outcomes
        .into_iter()
        .filter_map(|outcome| outcome.err().map(|error| format!("{error:#}")))
        .collect();
    let verdict = ledger.verdict(&HashSet::new()).await?;
    report(Row {
        scenario: "same name re-created unfinished (TTL 1 s)",
        objects: verdict.objects,
        wrong: verdict.wrong.len() + survived_errors.len(),
        missed: verdict.missed.len(),
        p99_delay: verdict.p99(),
        note: [verdict.note(), survived_errors.join("; ")]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// One name's rounds: even rounds leave the finished run to kube-retention (it must go on
/// time); odd rounds race it, deleting and re-creating the name around the deadline.
async fn lane_rounds(
    ns: &TestNamespace,
    ledger: &Ledger,
    lane: usize,
    rounds: usize,
) -> Result<()> {
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let name = format!("same-{lane}");
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (lane as u64 + 1);
    for round in 0..rounds {
        let created = create_buildrun(ns, &name, "app", json!({"ttlAfterSucceeded": "1s"})).await?;
        let finished = now_second();
        finish_buildrun(ns, &name, true, finished).await?;
        let deadline = finished + SignedDuration::from_secs(1);
        if round % 2 == 0 {
            eventually(
                Duration::from_secs(4),
                "a finished run deleted on time",
                || async { Ok(runs.get_opt(&name).await?.is_none()) },
            )
            .await?;
            continue;
        }
        sleep_until(deadline - SignedDuration::from_millis(300)).await;
        tokio::time::sleep(jitter(&mut seed, 600)).await;
        let uid = created.uid().context("a created run has a uid")?;
        let precondition = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        if runs.delete(&name, &precondition).await.is_ok() {
            ledger.deleted_by_scenario(&uid);
        }
        eventually(Duration::from_secs(5), "the old run gone", || async {
            Ok(runs
                .get_opt(&name)
                .await?
                .is_none_or(|run| run.uid() != Some(uid.clone())))
        })
        .await?;
        let again = create_buildrun(ns, &name, "app", json!({"ttlAfterSucceeded": "1s"})).await?;
        let new_uid = again.uid().context("a created run has a uid")?;
        // Past the old deadline by well over the controller's reaction time.
        sleep_until(Timestamp::now().max(deadline) + SignedDuration::from_millis(1500)).await;
        let current = runs.get_opt(&name).await?;
        ensure!(
            current.as_ref().and_then(ResourceExt::uid) == Some(new_uid.clone()),
            "{name}: the re-created, unfinished run was deleted"
        );
        if runs
            .delete(&name, &DeleteParams::background())
            .await
            .is_ok()
        {
            ledger.deleted_by_scenario(&new_uid);
        }
        eventually(
            Duration::from_secs(5),
            "the unfinished run gone",
            || async { Ok(runs.get_opt(&name).await?.is_none()) },
        )
        .await?;
    }
    Ok(())
}
