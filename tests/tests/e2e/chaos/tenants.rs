//! Every attack of issue 57 at once, with generated variants, beside a quiet tenant: no tenant
//! and no pod can hurt another, whatever they send. The attacker, a namespace editor and a pod
//! of its namespace:
//! - writes copying RetentionPolicies over its own ~800 KB Jobs, a new generated variant every
//!   few seconds ([`policies`]): the meter or the evaluator process's bound stops each;
//! - updates a 1.4 MB annotated Job eight at a time, over and over: the webhook reads it lean;
//! - opens thousands of idle HTTP/2 connections to the webhook and holds 128 slow bodies
//!   against it ([`port`]), while a policy only the webhook can refuse is written every two
//!   seconds: each must be refused by the webhook itself;
//! - announces its deletions to a closed port, and deletes a burst of its own — ConfigMaps by
//!   the thousand, cleaned by its own Cleaner, which it approves itself ([`deletions`]).
//!
//! Meanwhile namespace B's Jobs expire ten a second (within B's fair share of the controller's
//! request budget, 50 a second shared in turn by the namespaces with work), and a third
//! namespace's policy announces its deletions to a sink that answers. Asserted: every one of
//! B's Jobs deleted within 3 s of its deadline and none wrongly; none of the attacker's big
//! Jobs deleted and the copying policies stopped at their limits, saying which; every bad policy
//! refused by the webhook; every deletion of B and of the third namespace announced to the
//! admin's `--ledger-sink`, and each of the third namespace's to its own sink; the attacker's
//! breaker tripped and no other's; the controller and the webhook still the processes they
//! were (the controller's evaluator processes may have been replaced: it says so), and their
//! peak memory — the controller's with its evaluator's — within the chart's limits.
//!
//! It restarts the shared controller (with the breaker and the ledger sink an admin sets), so
//! it runs with the disruptive trials; the suite's controller is put back after.

mod deletions;
mod memory;
mod policies;
mod port;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, ensure};
use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube_retention_common::breaker::namespaces_configmap_name;
use kube_retention_e2e::components;
use libtest_mimic::Trial;
use serde_json::json;

use super::{Form, Row, report};
use crate::cleaners::sink::Sink;
use crate::support::{Env, TestNamespace, restart_controller};
use crate::workloads::eventually;

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "chaos_every_attack_at_once_no_tenant_and_no_pod_hurts_another",
        every_attack,
    )]
}

/// B's expiries a second.
const RATE: usize = 10;
/// The most B's Jobs may wait past their deadlines.
const MOST_DELAY: f64 = 3.0;
/// B's Jobs, expiring [`RATE`] a second throughout.
fn quiet_jobs(form: Form) -> usize {
    form.pick(300, 2_000)
}

/// Each namespace's circuit breaker, as installed (deletions in 10 minutes): above what B
/// deletes, which must not trip its own.
fn breaker(form: Form) -> usize {
    form.pick(1_000, 2_500)
}

/// How long the attacker's own statuses may take to say what happened: its evaluations go at
/// its share of the evaluator, and it queues seconds of work at once.
const ATTACKER_SAYS_WITHIN: Duration = Duration::from_secs(300);

async fn every_attack(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let breaker = breaker(Form::current());
    let admin = Sink::start().await?;
    restart_controller(
        &cluster,
        &[
            format!("--circuit-breaker={breaker}/10m"),
            "--cluster-circuit-breaker=1000000/10m".into(),
            format!("--ledger-sink={}", admin.url),
        ],
    )?;
    let attacker = TestNamespace::create(&ns.env, "attacker").await?;
    let announced = TestNamespace::create(&ns.env, "announced").await?;
    let outcome = beside_the_attacks(&ns, &attacker, &announced, &admin).await;
    attacker.delete().await;
    announced.delete().await;
    // The attacker's trip goes with it; the suite's controller comes back.
    let breakers: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), "kube-retention");
    breakers
        .delete(
            &namespaces_configmap_name("kube-retention-controller"),
            &DeleteParams::default(),
        )
        .await
        .ok();
    let restored = restart_controller(&cluster, &[]);
    outcome.and(restored)
}

async fn beside_the_attacks(
    ns: &TestNamespace,
    attacker: &TestNamespace,
    announced: &TestNamespace,
    admin: &Sink,
) -> Result<()> {
    let form = Form::current();
    let watched = memory::Watched::start(ns);
    let big = policies::big_jobs(attacker, form.pick(3, 10)).await?;
    // The Job the attacker updates: 1.4 MB, annotated, so each update is an admission review
    // of two such objects.
    let ttl = json!({"retention.dev/ttl": "1h"});
    crate::workloads::bulky_job(attacker, "huge", json!({}), ttl, 1_400_000).await?;
    // A sink on a port nobody listens on, and one that answers.
    let closed = std::net::TcpListener::bind((components::SINK_ADDRESS, 0))?
        .local_addr()?
        .port();
    let failing = format!("http://{}:{closed}/", components::SINK_ADDRESS);
    deletions::announcing_policy(attacker, "failing", "kube-retention.test/failing", &failing)
        .await?;
    let answering = Sink::start().await?;
    deletions::announcing_policy(
        announced,
        "announced",
        "kube-retention.test/announced",
        &answering.url,
    )
    .await?;

    let ca = std::fs::read_to_string(ns.env.cluster.layout.state("pki").join("webhook-ca.crt"))?;
    let connector = super::load::connector(&ca)?;
    let port = ns.env.cluster.webhook_port;
    let connections = Arc::new(port::Connections::default());
    let cut = Arc::new(AtomicUsize::new(0));
    let refusals = Arc::new(port::Refusals::default());
    let written = Arc::new(Mutex::new(policies::Written::default()));
    let updates = Arc::new(Updates::default());
    let pod = |last: u8| IpAddr::V4(Ipv4Addr::new(127, 0, 0, last));
    let attacks = vec![
        tokio::spawn(policies::keep_writing(
            attacker.clone(),
            policies::Variants::new(57),
            Duration::from_secs(10),
            written.clone(),
        )),
        tokio::spawn(update_storm(attacker.clone(), updates.clone())),
        tokio::spawn(port::idle_http2(
            connector.clone(),
            pod(3),
            port,
            form.pick(2_000, 5_000),
            connections.clone(),
        )),
        tokio::spawn(port::slow_bodies(connector, pod(4), port, 128, cut.clone())),
        tokio::spawn(port::bad_policies(attacker.clone(), refusals.clone())),
    ];
    let failing_jobs =
        deletions::finished_jobs(attacker, "failing", "kube-retention.test/failing", 200).await?;
    let burst = {
        let attacker = attacker.clone();
        // Past its breaker, which holds the rest; the long form's is issue 57's sixth attack.
        let count = form.pick(breaker(form) + 100, 10_001);
        tokio::spawn(async move { deletions::burst(&attacker, count).await })
    };
    let announced_jobs =
        deletions::finished_jobs(announced, "announced", "kube-retention.test/announced", 100)
            .await?;
    // B's Jobs, expiring throughout.
    let count = quiet_jobs(form);
    let verdict = super::hostile::expiring(ns, "quiet", count, RATE).await?;
    burst.await??;

    // What the attacks came to.
    let expected: Vec<(String, String)> = announced_jobs
        .iter()
        .map(|name| (announced.name.clone(), name.clone()))
        .collect();
    deletions::all_announced(
        &answering,
        &expected,
        "the quiet namespace's deletions announced to its sink",
    )
    .await?;
    let quiet_names: Vec<(String, String)> = (0..count)
        .map(|index| (ns.name.clone(), format!("quiet-{index}")))
        .chain(expected.iter().cloned())
        .collect();
    deletions::all_announced(
        admin,
        &quiet_names,
        "every deletion of B and of the quiet namespace announced to the admin's ledger",
    )
    .await?;
    eventually(
        Duration::from_secs(300),
        "the attacker's circuit breaker open",
        || async {
            Ok(deletions::tripped_namespaces(ns)
                .await?
                .contains(&attacker.name))
        },
    )
    .await?;
    let tripped = deletions::tripped_namespaces(ns).await?;
    ensure!(
        tripped == [attacker.name.clone()],
        "only the attacker's breaker opens: {tripped:?}"
    );
    let left = deletions::burst_left(attacker).await?;
    ensure!(
        left > 0,
        "the attacker's breaker held the rest of its burst"
    );
    // A copying policy that ran to its end answered false (each is built so); the attacks are
    // the ones stopped, each saying which limit, and at least one is.
    eventually(
        ATTACKER_SAYS_WITHIN,
        "the copying policies judged, at least one stopped at a limit",
        || async {
            let ready = policies::readiness(attacker).await?;
            Ok(ready.len() == policies::POLICIES
                && ready.iter().any(|(status, reason, _)| {
                    status == "False"
                        && (reason == "CostLimitExceeded" || reason == "EvaluatorLimitExceeded")
                }))
        },
    )
    .await?;
    for task in &attacks {
        task.abort();
    }
    join_all(attacks).await;
    let readiness = policies::readiness(attacker).await?;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &attacker.name);
    let listed = jobs.list(&ListParams::default()).await?;
    let names_left: std::collections::HashSet<&str> = listed
        .items
        .iter()
        .filter_map(|job| job.metadata.name.as_deref())
        .collect();
    let left_of = |names: &[String]| {
        names
            .iter()
            .filter(|name| names_left.contains(name.as_str()))
            .count()
    };
    let big_left = left_of(&big);
    let failing_left = left_of(&failing_jobs);
    let held = watched.held();
    let metrics = components::http_get(ns.env.cluster.controller_port, "/metrics")?;
    let series = |name: &str| -> u64 {
        metrics
            .lines()
            .filter(|line| line.starts_with(name))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let ended = series("kube_retention_evaluator_processes_ended_total");
    let stopped = series("kube_retention_evaluator_expressions_stopped_total");
    let written = written
        .lock()
        .map(|written| (written.admitted, written.refused));
    let (admitted, refused_at_admission) = written.unwrap_or_default();
    let by_the_webhook = refusals.by_the_webhook.load(Ordering::Relaxed);
    let otherwise = refusals.otherwise.load(Ordering::Relaxed);
    let first_otherwise = refusals
        .first_otherwise
        .lock()
        .map(|first| first.clone())
        .unwrap_or_default();
    let most_delay = verdict.quantile(1.0).unwrap_or(0.0);
    // Plain text: the row is a table cell of the book, where brackets would read as a link.
    let reasons = readiness
        .iter()
        .map(|(_, reason, _)| reason.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let first_update_refusal = updates
        .first_refusal
        .lock()
        .ok()
        .and_then(|first| first.clone())
        .map(|first| format!(", the first: {first}"))
        .unwrap_or_default();

    report(Row {
        scenario: "every attack at once: B's Jobs",
        objects: verdict.objects,
        wrong: verdict.wrong.len(),
        missed: verdict.missed.len(),
        p99_delay: verdict.p99(),
        note: format!(
            "{count} Jobs expiring at {RATE}/s, the longest {most_delay:.2} s past its deadline, \
             beside: {admitted} generated copying policies admitted and {refused_at_admission} \
             refused at admission over the attacker's ~800 KB Jobs (ready: {reasons}; \
             {ended} evaluator processes ended, {stopped} expressions stopped); {} updates of \
             a 1.4 MB Job, eight at a time ({} refused{first_update_refusal}); {} idle HTTP/2 connections opened from one address \
             ({} refused, {} closed by the webhook); 128 slow bodies held ({} cut off) while \
             {by_the_webhook} bad policies were refused by the webhook and {otherwise} \
             otherwise; 200 deletions announced to a closed port; a burst of ConfigMaps its \
             own Cleaner deleted until its namespace's breaker opened ({left} held) {}",
            updates.answered.load(Ordering::Relaxed),
            updates.refused.load(Ordering::Relaxed),
            connections.opened.load(Ordering::Relaxed),
            connections.refused.load(Ordering::Relaxed),
            connections.closed.load(Ordering::Relaxed),
            cut.load(Ordering::Relaxed),
            verdict.note()
        ),
    })?;
    report(Row {
        scenario: "every attack at once: kube-retention's processes",
        objects: 0,
        wrong: 0,
        missed: 0,
        p99_delay: None,
        note: format!(
            "{} restarts of the controller and the webhook; the most memory held: the \
             controller {} MiB and its evaluator processes {} MiB ({} of them), {} MiB \
             together at the most at one reading, at most {} MiB added up (the chart's limit \
             384 MiB); the webhook {} MiB (128 MiB); {}",
            held.restarts,
            held.controller_kib / 1024,
            held.peaks.evaluator_kib / 1024,
            held.peaks.evaluators,
            held.peaks.together_kib / 1024,
            held.controller_with_evaluator_kib / 1024,
            held.webhook_kib / 1024,
            super::hostile::builds(),
        ),
    })?;
    ensure!(
        most_delay <= MOST_DELAY,
        "one of B's Jobs waited {most_delay:.2} s past its deadline (at most {MOST_DELAY} s)"
    );
    ensure!(
        big_left == big.len(),
        "the copying policies deleted {} of the attacker's big Jobs",
        big.len() - big_left
    );
    ensure!(
        failing_left == 0,
        "{failing_left} of the Jobs announced to the closed port were not deleted"
    );
    ensure!(
        by_the_webhook > 0 && otherwise == 0,
        "the bad policies: {by_the_webhook} refused by the webhook, {otherwise} otherwise (the \
         first: {first_otherwise:?})"
    );
    ensure!(held.restarts == 0, "{} restarts", held.restarts);
    ensure!(
        held.controller_with_evaluator_kib < memory::CONTROLLER_LIMIT_KIB
            && held.webhook_kib < memory::WEBHOOK_LIMIT_KIB,
        "peak memory: the controller and its evaluator {} KiB (limit {}), the webhook {} KiB \
         (limit {})",
        held.controller_with_evaluator_kib,
        memory::CONTROLLER_LIMIT_KIB,
        held.webhook_kib,
        memory::WEBHOOK_LIMIT_KIB
    );
    Ok(())
}

/// Updates the attacker's 1.4 MB Job eight at a time, a round every two seconds, until
/// aborted; counts the updates answered and those refused (and the first refusal).
async fn update_storm(attacker: TestNamespace, updates: Arc<Updates>) {
    let jobs: Api<Job> = Api::namespaced(attacker.env.client.clone(), &attacker.name);
    for round in 0u64.. {
        let patches = (0..8).map(|index| {
            let jobs = jobs.clone();
            async move {
                let patch = json!({"metadata": {"annotations": {
                    "example.com/update": format!("{round}-{index}")}}});
                jobs.patch("huge", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        });
        for answer in join_all(patches).await {
            match answer {
                Ok(()) => updates.answered.fetch_add(1, Ordering::Relaxed),
                Err(error) => {
                    if let Ok(mut first) = updates.first_refusal.lock() {
                        first.get_or_insert_with(|| error.to_string());
                    }
                    updates.refused.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// What the update storm came to.
#[derive(Debug, Default)]
struct Updates {
    answered: AtomicUsize,
    refused: AtomicUsize,
    first_refusal: Mutex<Option<String>>,
}
