//! Processes dying under load: the controller SIGKILLed at random moments while thousands of
//! objects expire (every due object goes, no unfinished one does, and each restarted process
//! deletes again within 3 s), and kube-apiserver restarted with etcd compacted, so every watch
//! must list afresh (410 Gone): no deletion lost or doubled, none judged on stale data.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{ApiResource, Patch, PatchParams};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::process::tracked;
use libtest_mimic::Trial;
use nix::sys::signal::{Signal, kill};
use serde_json::json;

use super::recreate::jitter;
use super::{Form, Ledger, Row, report};
use crate::audit;
use crate::support::{Env, TestNamespace};
use crate::workloads::{create_job_in, eventually_every, finish_job, now_second};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "chaos_controller_sigkilled_at_random_while_thousands_of_jobs_expire",
            sigkills,
        ),
        env.trial(
            "chaos_apiserver_restarted_with_etcd_compacted_mid_run",
            apiserver_restart,
        ),
    ]
}

/// Requests in flight while preparing objects.
const PARALLEL: usize = 16;

/// Jobs made for a scenario.
struct Prepared {
    unfinished: Vec<String>,
    /// When the others finished.
    finished: Timestamp,
}

/// The TTL of Job number `index`: from 4 s to 4 + `spread` s.
fn ttl_of(index: usize, spread: u64) -> u64 {
    4 + index as u64 % spread
}

/// Creates `count` Jobs `job-N` with TTLs from 4 to 4 + `spread` s after success; every tenth
/// is left unfinished.
async fn prepare(ns: &TestNamespace, count: usize, spread: u64) -> Result<Prepared> {
    let client = &ns.env.client;
    let names: Vec<(String, u64)> = (0..count)
        .map(|index| (format!("job-{index}"), ttl_of(index, spread)))
        .collect();
    stream::iter(&names)
        .map(|(name, ttl)| async move {
            let ttl = json!({"retention.dev/ttl-after-succeeded": format!("{ttl}s")});
            create_job_in(client, &ns.name, name, ttl).await
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await?;
    let finished = now_second();
    stream::iter(
        names
            .iter()
            .enumerate()
            .filter(|(index, _)| index % 10 != 0),
    )
    .map(|(_, (name, _))| finish_job(client, &ns.name, name, true, finished))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<_>>()
    .await?;
    let unfinished = names
        .iter()
        .enumerate()
        .filter(|(index, _)| index % 10 == 0)
        .map(|(_, (name, _))| name.clone())
        .collect();
    Ok(Prepared {
        unfinished,
        finished,
    })
}

async fn all_due_gone(ns: &TestNamespace, unfinished: usize, timeout: Duration) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    // Once a second: a list of up to 10,000 Jobs is work for the API server the scenario measures.
    eventually_every(
        super::LIST_EVERY,
        timeout,
        "every due Job deleted",
        || async { Ok(jobs.list(&Default::default()).await?.items.len() <= unfinished) },
    )
    .await
}

async fn survivors(ns: &TestNamespace, names: &[String]) -> Result<Vec<String>> {
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let mut gone = Vec::new();
    for name in names {
        if jobs.get_opt(name).await?.is_none() {
            gone.push(name.clone());
        }
    }
    Ok(gone)
}

fn controller_deletes(ns: &TestNamespace) -> Result<Vec<serde_json::Value>> {
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    audit::requests(ns, &user, "delete", "jobs", Some(&ns.name))
}

/// How often the controller has listed Jobs completely (its `kube_retention_watch_lists_total`).
fn job_lists(cluster: &LocalCluster) -> Result<u64> {
    let series = r#"kube_retention_watch_lists_total{kind="Job.batch"}"#;
    components::counter(cluster.controller_port, series)
}

fn received(event: &serde_json::Value) -> Option<Timestamp> {
    event["requestReceivedTimestamp"].as_str()?.parse().ok()
}

async fn sigkills(ns: TestNamespace) -> Result<()> {
    let form = Form::current();
    let count = form.pick(1000, 10_000);
    let kills = form.pick(3, 5);
    let resource = ApiResource::erase::<Job>(&());
    let ledger = Ledger::start(ns.dynamic(&resource), resource).await;
    let unfinished = prepare(&ns, count, 20).await?.unfinished;
    let cluster = ns.env.cluster.clone();
    let controller = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut restarts = Vec::new();
    let outcome = async {
        for _ in 0..kills {
            tokio::time::sleep(Duration::from_secs(2) + jitter(&mut seed, 4000)).await;
            controller.kill()?;
            tokio::time::sleep(Duration::from_millis(200) + jitter(&mut seed, 800)).await;
            restarts.push(Timestamp::now());
            components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
        }
        let budget = Duration::from_secs(60 + count as u64 / 40);
        all_due_gone(&ns, unfinished.len(), budget).await
    }
    .await;
    if controller.live_pid().is_none() {
        components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
    }
    outcome?;
    let deletes = controller_deletes(&ns)?;
    let mut first_after = Vec::new();
    for start in &restarts {
        let first = deletes
            .iter()
            .filter_map(received)
            .filter(|at| at >= start)
            .min();
        if let Some(first) = first {
            first_after.push(first.duration_since(*start).as_secs_f64());
        }
    }
    let slowest = first_after.iter().copied().fold(0.0_f64, f64::max);
    let wrongly_gone = survivors(&ns, &unfinished).await?;
    let verdict = ledger.verdict(&HashSet::new()).await?;
    report(Row {
        scenario: "controller SIGKILLed at random while Jobs expire",
        objects: verdict.objects,
        wrong: verdict.wrong.len() + wrongly_gone.len(),
        missed: verdict.missed.len(),
        p99_delay: verdict.p99(),
        note: format!(
            "{kills} kills; first deletion after each restart {} s after the process started (goal ≤ 3 s) {}",
            first_after
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(" / "),
            verdict.note()
        ),
    })?;
    ensure!(
        first_after.len() == restarts.len(),
        "a restart that never deleted: {first_after:?}"
    );
    ensure!(
        slowest <= 3.0,
        "a restarted controller took {slowest:.1} s to delete"
    );
    Ok(())
}

async fn apiserver_restart(ns: TestNamespace) -> Result<()> {
    let judged = apiserver_restart_judged(&ns).await;
    // Whatever was judged, the next test gets a whole control plane: kube-controller-manager
    // reconnects on its own backoff, which outlasted a namespace's 30 s wait for its
    // `default` ServiceAccount once.
    let cluster = ns.env.cluster.clone();
    tokio::task::spawn_blocking(move || {
        cluster.wait_until_controllers_act(Duration::from_secs(120))
    })
    .await??;
    judged
}

async fn apiserver_restart_judged(ns: &TestNamespace) -> Result<()> {
    let count = Form::current().pick(300, 3000);
    let resource = ApiResource::erase::<Job>(&());
    let ledger = Ledger::start(ns.dynamic(&resource), resource).await;
    let spread = 40;
    let Prepared {
        unfinished,
        finished,
    } = prepare(ns, count, spread).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cluster = ns.env.cluster.clone();
    let controller = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    let pid = controller.live_pid().context("the controller runs")?;
    // Frozen, the controller keeps its records while the objects change behind its back; after
    // the restart its watches resume from a compacted resourceVersion and must list afresh.
    let lists_before = job_lists(&cluster)?;
    kill(pid, Signal::SIGSTOP)?;
    let changed = async {
        let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
        let not_yet_due = |index: &usize| {
            let deadline = finished + SignedDuration::from_secs(ttl_of(*index, spread) as i64);
            deadline > Timestamp::now() + SignedDuration::from_secs(1)
        };
        let extended: Vec<String> = (0..count)
            .filter(|index| index % 10 != 0)
            .filter(not_yet_due)
            .take(20)
            .map(|index| format!("job-{index}"))
            .collect();
        let longer =
            json!({"metadata": {"annotations": {"retention.dev/ttl-after-succeeded": "10m"}}});
        for name in &extended {
            jobs.patch(name, &PatchParams::default(), &Patch::Merge(&longer))
                .await?;
        }
        let restarting = cluster.clone();
        tokio::task::spawn_blocking(move || restarting.restart_apiserver(true)).await??;
        Ok::<_, anyhow::Error>(extended)
    }
    .await;
    kill(pid, Signal::SIGCONT)?;
    let extended = changed?;
    ensure!(!extended.is_empty(), "every TTL passed before the change");
    let budget = Duration::from_secs(60 + count as u64 / 40);
    let jobs_left = unfinished.len() + extended.len();
    let gone = all_due_gone(ns, jobs_left, budget).await;
    let relists = job_lists(&ns.env.cluster)? - lists_before;
    gone?;
    let must_stay: HashSet<String> = extended.iter().cloned().collect();
    let verdict = ledger.verdict(&must_stay).await?;
    let mut kept_wrong = survivors(ns, &unfinished).await?;
    kept_wrong.extend(survivors(ns, &extended).await?);
    let mut per_name: HashMap<String, usize> = HashMap::new();
    for event in controller_deletes(ns)? {
        if event["responseStatus"]["code"] == 200 {
            *per_name
                .entry(
                    event["objectRef"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
                .or_default() += 1;
        }
    }
    let doubled = per_name.values().filter(|count| **count > 1).count();
    report(Row {
        scenario: "kube-apiserver restarted, etcd compacted (410 Gone)",
        objects: verdict.objects,
        wrong: verdict.wrong.len() + kept_wrong.len() + doubled,
        missed: verdict.missed.len(),
        p99_delay: verdict.p99(),
        note: format!(
            "controller frozen while {} TTLs were extended and the API server restarted; the controller listed Jobs afresh {relists} times after; {doubled} doubled deletions {}",
            extended.len(),
            verdict.note()
        ),
    })?;
    ensure!(
        relists >= 1,
        "the controller never listed Jobs again after etcd was compacted"
    );
    Ok(())
}
