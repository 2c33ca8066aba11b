//! The request budget and the executor's turns against an API server that only records what it
//! is asked: a namespace's single deletion goes out right after another's first of thousands,
//! the bound on informational work is counted, and a Cleaner's DELETEs wait for the budget the
//! executor spends.

use crate::work_support;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{ApiResource, PropagationPolicy};
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_cleaners::act::{Cleaning, clean};
use kube_retention_cleaners::book::{self, Clean, Doomed};
use kube_retention_common::Registry;
use kube_retention_controller::executor::{Budget, Executor, Parts, Settings};
use kube_retention_controller::metrics::Metrics;
use tokio::sync::mpsc;
use work_support::{deletion, recording_client, warning};

fn recorder(client: &Client) -> Recorder {
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    Recorder::new(client.clone(), reporter)
}

fn executor(client: &Client, budget: Budget, metrics: &Metrics) -> Executor {
    let (feedback, _) = mpsc::unbounded_channel();
    let (executor, _tasks) = Executor::spawn(Parts {
        client: client.clone(),
        settings: Settings {
            breaker: kube_retention_io::breaker::Breaker::off(),
            budget,
            propagation: PropagationPolicy::Background,
            concurrency: 1,
            events: false,
            event_window: Duration::ZERO,
        },
        metrics: metrics.clone(),
        recorder: recorder(client),
        feedback,
        ledger: None,
        clock: kube_retention_io::clock::Clock::System,
    });
    executor
}

/// Waits (in real time: the budget's clock is not tokio's) until `done` holds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_namespaces_single_deletion_goes_out_right_after_anothers_first() {
    let (client, seen) = recording_client();
    let metrics = Metrics::default();
    let executor = executor(&client, Budget::unlimited(), &metrics);
    // All submitted before the executor's task first runs (one thread): one backlog.
    for n in 0..2_000 {
        executor.submit(deletion("flood", &format!("job-{n}")), Registry::builtin());
    }
    executor.submit(deletion("quiet", "due"), Registry::builtin());
    eventually("three DELETEs", || seen.lock().unwrap().len() >= 3).await;
    let first: Vec<String> = seen.lock().unwrap()[..3].to_vec();
    assert_eq!(
        first,
        [
            "DELETE /apis/batch/v1/namespaces/flood/jobs/job-0",
            "DELETE /apis/batch/v1/namespaces/quiet/jobs/due",
            "DELETE /apis/batch/v1/namespaces/flood/jobs/job-1",
        ]
    );
}

#[tokio::test]
async fn informational_work_beyond_the_bound_is_dropped_and_counted() {
    let (client, _seen) = recording_client();
    let metrics = Metrics::default();
    let budget = Budget::per_second(NonZeroU32::new(1));
    let executor = executor(&client, budget, &metrics);
    let bound = kube_retention_controller::executor::queue::MAX_QUEUED_EVENTS;
    for n in 0..bound + 50 {
        executor.submit(warning("loud", &n.to_string()), Registry::builtin());
    }
    eventually("50 dropped", || metrics.events_dropped.get() >= 50).await;
    assert_eq!(metrics.events_dropped.get(), 50);
}

fn cleaning(client: &Client, budget: Budget) -> Arc<Cleaning> {
    Arc::new(Cleaning {
        breaker: kube_retention_io::breaker::Breaker::off(),
        client: client.clone(),
        recorder: recorder(client),
        metrics: Default::default(),
        propagation: PropagationPolicy::Background,
        budget,
        ledger: crate::sink_support::ledger(),
        clock: kube_retention_io::clock::Clock::System,
        max_immediate_deletions: 0,
    })
}

fn five_config_maps() -> Clean {
    let objects = (0..5)
        .map(|n| Doomed {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespace: "team".into(),
            name: format!("cm-{n}"),
            uid: format!("uid-{n}"),
        })
        .collect();
    Clean {
        cleaner: book::CleanerKey {
            namespace: "team".into(),
            name: "cleaner".into(),
        },
        uid: "cleaner-uid".into(),
        generation: Some(1),
        approved: false,
        objects,
        release: None,
        sink: None,
    }
}

#[tokio::test]
async fn a_cleaners_deletes_wait_for_the_budget_the_executor_spends() {
    let (client, seen) = recording_client();
    // 10 a second, 10 at once after a pause: 100 ms a request once the burst is spent.
    let budget = Budget::per_second(NonZeroU32::new(10));
    let executor_share = budget.clone();
    for _ in 0..10 {
        executor_share.acquire().await;
    }
    let start = Instant::now();
    let cleaned = clean(cleaning(&client, budget), five_config_maps())
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(cleaned.deleted.len(), 5, "{:?}", cleaned.deleted);
    assert!(
        elapsed >= Duration::from_millis(450),
        "five DELETEs at 100 ms each took {elapsed:?}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5);
    assert!(
        seen.iter().all(|line| line.starts_with("DELETE ")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn clones_of_a_budget_draw_from_the_same_one() {
    let budget = Budget::per_second(NonZeroU32::new(20));
    let other = budget.clone();
    for _ in 0..20 {
        budget.acquire().await;
    }
    let start = Instant::now();
    other.acquire().await;
    assert!(
        start.elapsed() >= Duration::from_millis(40),
        "{:?}",
        start.elapsed()
    );

    let unlimited = Budget::unlimited();
    let start = Instant::now();
    for _ in 0..10_000 {
        unlimited.acquire().await;
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}
