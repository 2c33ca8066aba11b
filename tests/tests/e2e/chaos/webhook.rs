//! The webhook sent SIGTERM under 1,000 requests per second: it stops being ready, closes each
//! connection after its response while the endpoints catch up, then drains — 0 failed requests,
//! the second replica serving the rest.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use hyper::body::Bytes;
use kube_retention_e2e::components::{self, SECOND_WEBHOOK, WEBHOOK};
use kube_retention_e2e::process::tracked;
use libtest_mimic::Trial;
use nix::sys::signal::{Signal, kill};
use serde_json::json;

use super::load::{self, Replica};
use super::{Form, Row, report};
use crate::support::{Env, TestNamespace};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "chaos_webhook_sigterm_under_1000_requests_per_second_fails_none",
        sigterm_under_load,
    )]
}

const RATE: u64 = 1000;

fn review() -> Bytes {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "team-a", "annotations": {"retention.dev/ttl": "10m"}}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "c", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": object, "dryRun": false}});
    Bytes::from(review.to_string())
}

async fn sigterm_under_load(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let second_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let second = components::start_webhook_replica(&cluster, SECOND_WEBHOOK, second_port)?;
    let outcome = under_load(&ns, second_port).await;
    // Put the first replica back where the webhook configurations point, then stop the second.
    let first = tracked(&cluster.layout.state_dir, &[WEBHOOK]).remove(0);
    if first.live_pid().is_none() {
        components::start_webhook(&cluster)?;
    }
    components::wait_for_admission(&cluster, Duration::from_secs(30))?;
    second.stop(Duration::from_secs(10))?;
    outcome
}

async fn under_load(ns: &TestNamespace, second_port: u16) -> Result<()> {
    let cluster = &ns.env.cluster;
    let ca = std::fs::read_to_string(cluster.layout.state("pki/webhook-ca.crt"))?;
    let connector = load::connector(&ca)?;
    let replicas = Arc::new(vec![
        Replica::new(cluster.webhook_port),
        Replica::new(second_port),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(load::poll_readiness(
        replicas.clone(),
        connector.clone(),
        stop.clone(),
    ));
    let started = Instant::now();
    while !replicas
        .iter()
        .all(|replica| replica.ready.load(Ordering::Relaxed))
    {
        ensure!(
            started.elapsed() < Duration::from_secs(30),
            "the second replica never became ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let duration = Duration::from_secs(Form::current().pick(6, 30));
    let load = tokio::spawn(load::run(
        replicas.clone(),
        connector,
        review(),
        RATE,
        duration,
        32,
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let first = tracked(&cluster.layout.state_dir, &[WEBHOOK]).remove(0);
    let pid = first.live_pid().context("the first webhook replica runs")?;
    let answered_before = replicas[0].answered.load(Ordering::Relaxed);
    kill(pid, Signal::SIGTERM)?;
    let terminated = Instant::now();
    let outcome = load.await?;
    stop.store(true, Ordering::Relaxed);
    poller.await.ok();
    let exited_within = loop {
        if first.live_pid().is_none() {
            break terminated.elapsed();
        }
        ensure!(
            terminated.elapsed() < Duration::from_secs(20),
            "the replica did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let [first_answered, second_answered] =
        [0, 1].map(|index| replicas[index].answered.load(Ordering::Relaxed));
    let achieved = outcome.sent as f64 / duration.as_secs_f64();
    report(Row {
        scenario: "webhook SIGTERM under 1,000 req/s",
        objects: usize::try_from(outcome.sent)?,
        wrong: usize::try_from(outcome.failed)?,
        missed: 0,
        p99_delay: None,
        note: format!(
            "objects = AdmissionReviews sent ({achieved:.0}/s); wrong = failed requests; the stopped replica answered {} after SIGTERM and exited {:.1} s later; the other answered {second_answered}",
            first_answered - answered_before,
            exited_within.as_secs_f64()
        ),
    })?;
    ensure!(
        achieved >= RATE as f64 * 0.9,
        "only {achieved:.0} requests per second were sent"
    );
    ensure!(
        first_answered > 0 && second_answered > 0,
        "both replicas served: {first_answered} / {second_answered}"
    );
    Ok(())
}
