//! Status writes (a policy's, here) against a mocked API server, on paused time: a PATCH
//! answered 500 or 409 is retried after a backoff until one succeeds, and then nothing more is
//! sent; a newer status replaces a pending retry and goes out at once; a write refused because
//! the object is gone, or forgotten by the loop, is not retried; a replica that stops leading
//! drops what is pending and writes nothing until it leads again.

use std::time::Duration;

use backon::ExponentialBuilder;
use kube::runtime::reflector::ObjectRef;
use kube_retention_apimock::Received;
use kube_retention_common::api::{RetentionPolicy, RetentionPolicySpec};
use kube_retention_io::budget::Budget;
use kube_retention_io::status_writes::{self as writes, StatusOf, StatusWrites};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

const PATH: &str =
    "/apis/retention.dev/v1alpha1/namespaces/team-a/retentionpolicies/nightly/status";

/// 1 s doubling, without jitter: the retries' times are exact.
const EXACT: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_secs(1))
    .with_max_delay(Duration::from_secs(60))
    .without_max_times();

/// A request the API server saw: when (since the test started), what, and which status it
/// carried (its `matched`).
#[derive(Debug, PartialEq)]
struct Call {
    at: Duration,
    method: String,
    path: String,
    matched: u64,
}

fn call(at: u64, matched: u64) -> Call {
    Call {
        at: Duration::from_secs(at),
        method: "PATCH".into(),
        path: PATH.into(),
        matched,
    }
}

struct ApiServer {
    server: kube_retention_apimock::ApiServer,
    started: Instant,
    calls: Vec<Call>,
    /// Whether this replica leads (it does at first).
    leading: watch::Sender<bool>,
}

impl ApiServer {
    fn start(retry: ExponentialBuilder) -> (Self, StatusWrites) {
        let (client, server) = kube_retention_apimock::pair();
        let (leading, leadership) = watch::channel(true);
        let (writes, _task) = StatusWrites::spawn(client, retry, Budget::unlimited(), leadership);
        let server = Self {
            server,
            started: Instant::now(),
            calls: Vec::new(),
            leading,
        };
        (server, writes)
    }

    /// The next request, recorded; `None` if none comes within an hour.
    async fn next(&mut self) -> Option<Received> {
        let received = self.server.next().await?;
        self.calls.push(Call {
            at: self.started.elapsed(),
            method: received.method.clone(),
            path: received.path.clone(),
            matched: received.body["status"]["matched"].as_u64().unwrap(),
        });
        Some(received)
    }

    /// Answers the next request with `code` (a Status), or with the policy when it is 200.
    async fn answer(&mut self, code: u16) {
        let received = self.next().await.expect("a request");
        if code == 200 {
            let mut policy = RetentionPolicy::new("nightly", RetentionPolicySpec::default());
            policy.metadata.namespace = Some("team-a".into());
            received.reply(200, &serde_json::to_value(&policy).unwrap());
        } else {
            received.refuse(code, "refused");
        }
    }

    /// Whether no further request comes within an hour.
    async fn quiet(&mut self) -> bool {
        self.next().await.is_none()
    }
}

fn key() -> StatusOf {
    ObjectRef::<RetentionPolicy>::new("nightly")
        .within("team-a")
        .erase()
}

fn status(matched: u64) -> Value {
    json!({ "matched": matched })
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_is_retried_with_backoff_until_it_succeeds() {
    let (mut server, writes) = ApiServer::start(EXACT);
    writes.write(key(), status(3));
    server.answer(500).await;
    server.answer(409).await;
    server.answer(200).await;
    assert!(server.quiet().await, "nothing after the write succeeded");
    assert_eq!(server.calls, [call(0, 3), call(1, 3), call(3, 3)]);
}

#[tokio::test(start_paused = true)]
async fn the_controllers_schedule_waits_one_to_two_seconds_first() {
    let (mut server, writes) = ApiServer::start(writes::RETRY);
    writes.write(key(), status(3));
    server.answer(500).await;
    server.answer(200).await;
    assert!(server.quiet().await);
    assert_eq!(server.calls.len(), 2, "{:?}", server.calls);
    let waited = server.calls[1].at;
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_newer_status_replaces_a_pending_retry_and_goes_out_at_once() {
    let (mut server, writes) = ApiServer::start(EXACT);
    writes.write(key(), status(3));
    server.answer(409).await;
    writes.write(key(), status(4));
    server.answer(200).await;
    assert!(server.quiet().await, "the failed status is not retried");
    assert_eq!(server.calls, [call(0, 3), call(0, 4)]);
}

#[tokio::test(start_paused = true)]
async fn a_newer_status_waits_for_the_write_under_way() {
    let (mut server, writes) = ApiServer::start(EXACT);
    writes.write(key(), status(3));
    let first = server.next().await.unwrap();
    writes.write(key(), status(4));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        server.calls,
        [call(0, 3)],
        "one write of a policy at a time"
    );
    first.break_off("connection reset");
    server.answer(200).await;
    assert!(server.quiet().await);
    assert_eq!(server.calls, [call(0, 3), call(5, 4)]);
}

#[tokio::test(start_paused = true)]
async fn a_policy_gone_or_forgotten_is_not_retried() {
    let (mut server, writes) = ApiServer::start(EXACT);
    writes.write(key(), status(3));
    server.answer(404).await;
    assert!(server.quiet().await, "404: the policy is gone");

    writes.write(key(), status(4));
    server.answer(500).await;
    writes.forget(&key());
    assert!(server.quiet().await, "forgotten before its retry");
    // The second write went out after the first hour of quiet.
    assert_eq!(server.calls, [call(0, 3), call(3600, 4)]);
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_stops_leading_drops_its_retries_and_writes_nothing_until_it_leads() {
    let (mut server, writes) = ApiServer::start(EXACT);
    writes.write(key(), status(3));
    server.answer(500).await;
    server.leading.send_replace(false);
    assert!(
        server.quiet().await,
        "the retry is dropped: the new leader writes"
    );
    writes.write(key(), status(4));
    assert!(server.quiet().await, "a follower writes nothing");
    server.leading.send_replace(true);
    tokio::task::yield_now().await;
    writes.write(key(), status(5));
    server.answer(200).await;
    assert!(server.quiet().await);
    assert_eq!(server.calls, [call(0, 3), call(7200, 5)]);
}

/// The status of the policy `name` in `namespace`, as the writer keys it.
fn key_in(namespace: &str, name: &str) -> StatusOf {
    ObjectRef::<RetentionPolicy>::new(name)
        .within(namespace)
        .erase()
}

/// The PATCHes that arrive within a second of paused time, left unanswered.
async fn arriving(server: &mut kube_retention_apimock::ApiServer) -> Vec<Received> {
    let mut arrived = Vec::new();
    while let Some(received) = server.next_within(Duration::from_secs(1)).await {
        arrived.push(received);
    }
    arrived
}

#[tokio::test(start_paused = true)]
async fn one_write_of_a_namespace_at_a_time_and_a_few_in_all() {
    let (client, mut server) = kube_retention_apimock::pair();
    let (_leading, leadership) = watch::channel(true);
    let (writes, _task) = StatusWrites::spawn(client, EXACT, Budget::unlimited(), leadership);
    // A tenant's hundred policies change status at once, then another tenant's one.
    for index in 0..100 {
        writes.write(key_in("flood", &format!("p-{index}")), status(index));
    }
    writes.write(key_in("quiet", "nightly"), status(1));
    let arrived = arriving(&mut server).await;
    let namespaces: Vec<&str> = arrived
        .iter()
        .map(|received| received.path.split('/').nth(5).unwrap_or_default())
        .collect();
    assert_eq!(arrived.len(), 2, "one of each namespace: {namespaces:?}");
    assert!(namespaces.contains(&"flood") && namespaces.contains(&"quiet"));

    // Many namespaces: at most WRITING under way.
    for index in 0..10 {
        writes.write(key_in(&format!("team-{index}"), "nightly"), status(2));
    }
    let mut more = arriving(&mut server).await;
    assert_eq!(arrived.len() + more.len(), writes::WRITING);
    // One answered: another goes (the others wait, unanswered).
    let answered = more.pop().expect("a write");
    answered.refuse(404, "gone");
    let after: Vec<String> = arriving(&mut server)
        .await
        .iter()
        .map(Received::line)
        .collect();
    assert_eq!(after.len(), 1, "{after:?}");
    drop((arrived, more));
}

#[tokio::test]
async fn each_write_waits_for_the_request_budget() {
    let (client, mut server) = kube_retention_apimock::pair();
    let (_leading, leadership) = watch::channel(true);
    let budget = Budget::per_second(std::num::NonZeroU32::new(1));
    let (writes, _task) = StatusWrites::spawn(client, EXACT, budget.clone(), leadership);
    budget.acquire().await; // the deletions spent this second's share
    writes.write(key_in("team-a", "nightly"), status(1));
    assert!(
        server
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "not before the budget has room"
    );
    let patch = server.next().await.expect("the write, once it has");
    assert_eq!(patch.method, "PATCH");
}
