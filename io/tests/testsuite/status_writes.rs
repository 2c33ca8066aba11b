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
        let (writes, _task) = StatusWrites::spawn(client, retry, leadership);
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
