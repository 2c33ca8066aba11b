//! The controller's loop driven end to end without a cluster, on paused tokio time (as
//! kube-runtime's scheduler tests are): watch events go in through `Watches::replay`, the wall
//! clock follows tokio's (`Clock::following_tokio`), and the requests come out at a mocked API
//! server. An hour-long TTL passes in microseconds, and the DELETE is asserted at its second.

use std::time::Duration;

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use kube_retention_common::kinds::KindId;
use kube_retention_controller::run::Clock;
use kube_retention_evaluator::{Evaluator, EvaluatorMetrics};
use kube_retention_io::lean::{self, LeanObject};
use kube_retention_io::watches::WatchEvent;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::loop_support;

const START: &str = "2026-06-01T12:00:00Z";

/// A Job that finished at `finished`, to go an hour after (`ttl-after-finished: 1h`), stamped
/// with that deadline as the webhook stamps it.
fn finished_job(name: &str, finished: Timestamp) -> DynamicObject {
    let deadline = (finished + jiff::SignedDuration::from_hours(1)).to_string();
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
                     "resourceVersion": "7", "creationTimestamp": "2026-06-01T11:00:00Z",
                     "labels": {"retention.dev/managed": "true"},
                     "annotations": {"retention.dev/ttl-after-finished": "1h",
                                     "retention.dev/expires-at": deadline,
                                     "retention.dev/stamped": deadline}},
        "status": {"completionTime": finished.to_string(), "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": finished.to_string()}]}}))
    .unwrap()
}

/// The loop running on paused time against a mocked API server, Jobs fed in by the test.
struct Harness {
    server: kube_retention_apimock::ApiServer,
    events: mpsc::UnboundedSender<WatchEvent>,
    leading: watch::Sender<bool>,
    jobs: KindId,
    began: Instant,
}

impl Harness {
    fn start() -> Self {
        let start: Timestamp = START.parse().unwrap();
        let (client, server) = kube_retention_apimock::pair();
        let evaluator = Evaluator::spawn(
            EvaluatorMetrics::default(),
            crate::support::evaluator_program(),
            Default::default(),
        )
        .unwrap();
        let running = loop_support::start(
            client,
            Clock::following_tokio(start),
            "Job.batch",
            evaluator,
        );
        Self {
            server,
            events: running.events,
            leading: running.leading,
            jobs: running.kind,
            began: Instant::now(),
        }
    }

    /// Whether no request comes for three hours (of paused time): past any deadline here.
    async fn quiet_for_three_hours(&mut self) -> bool {
        self.server
            .next_within(Duration::from_secs(3 * 3600))
            .await
            .is_none()
    }

    /// Lists one Job, finished ten minutes before the start: due fifty minutes on.
    fn list_a_job_due_in_fifty_minutes(&self) {
        let finished = START.parse::<Timestamp>().unwrap() - jiff::SignedDuration::from_mins(10);
        let job = finished_job("nightly", finished);
        for event in [Event::Init, Event::InitApply(job), Event::InitDone] {
            self.events
                .send(WatchEvent::Object(self.jobs, Ok(event)))
                .unwrap();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_finished_job_is_deleted_at_its_deadline_with_preconditions_and_nothing_before() {
    let mut harness = Harness::start();
    harness.list_a_job_due_in_fifty_minutes();

    let delete = harness.server.next().await.expect("the DELETE");
    let waited = harness.began.elapsed();
    assert_eq!(
        delete.line(),
        "DELETE /apis/batch/v1/namespaces/team-a/jobs/nightly"
    );
    assert!(
        waited >= Duration::from_secs(50 * 60) && waited < Duration::from_secs(50 * 60 + 2),
        "sent after {waited:?}, not at the deadline fifty minutes on"
    );
    assert_eq!(
        delete.body["preconditions"],
        json!({"uid": "uid-nightly", "resourceVersion": "7"})
    );
    assert_eq!(delete.body["propagationPolicy"], "Background");
    delete.reply(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    );
    assert!(
        harness.server.quiet().await,
        "one request, the DELETE, and nothing else"
    );
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_stops_leading_before_the_deadline_deletes_nothing_until_it_leads_again() {
    let mut harness = Harness::start();
    harness.list_a_job_due_in_fifty_minutes();
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    harness.leading.send(false).unwrap();
    assert!(
        harness.quiet_for_three_hours().await,
        "a follower sends no DELETE, past the deadline too"
    );
    harness.leading.send(true).unwrap();
    let delete = harness
        .server
        .next()
        .await
        .expect("the new leader's DELETE");
    let waited = harness.began.elapsed();
    assert_eq!(
        delete.line(),
        "DELETE /apis/batch/v1/namespaces/team-a/jobs/nightly"
    );
    assert!(
        waited < Duration::from_secs(30 * 60 + 3 * 3600 + 2),
        "an overdue object goes as soon as the replica leads again, not {waited:?} in"
    );
}

/// `job` as its watch decodes it after a tenant filled its spec with 24,000 one-entry maps
/// (280 KB of text, past 16 MiB decoded): its metadata alone.
fn past_bound(job: &DynamicObject) -> DynamicObject {
    let mut dense = serde_json::to_value(job).unwrap();
    dense["metadata"]["resourceVersion"] = json!("8");
    dense["spec"] = json!({"env": vec![json!({"name": "E"}); 24_000]});
    let LeanObject(object) = serde_json::from_value(dense).unwrap();
    assert!(lean::past_bound(&object));
    object
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_new_version_held_past_the_bound_is_not_deleted_until_one_fits() {
    let mut harness = Harness::start();
    harness.list_a_job_due_in_fifty_minutes();
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    let finished = START.parse::<Timestamp>().unwrap() - jiff::SignedDuration::from_mins(10);
    let job = finished_job("nightly", finished);
    harness
        .events
        .send(WatchEvent::Object(
            harness.jobs,
            Ok(Event::Apply(past_bound(&job))),
        ))
        .unwrap();
    assert!(
        harness.quiet_for_three_hours().await,
        "no DELETE of a version the controller could not read, past the deadline too"
    );
    // A version that fits again is judged: overdue, it goes at once.
    let mut fits = job;
    fits.metadata.resource_version = Some("9".into());
    harness
        .events
        .send(WatchEvent::Object(harness.jobs, Ok(Event::Apply(fits))))
        .unwrap();
    let delete = harness.server.next().await.expect("the DELETE");
    assert_eq!(
        delete.line(),
        "DELETE /apis/batch/v1/namespaces/team-a/jobs/nightly"
    );
    assert_eq!(
        delete.body["preconditions"],
        json!({"uid": "uid-nightly", "resourceVersion": "9"})
    );
}
