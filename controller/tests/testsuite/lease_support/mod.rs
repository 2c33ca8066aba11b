//! The mocked API server (`kube-retention-apimock`) for the leader elector's tests, on paused
//! time: it records
//! each request to the Lease (when, since the elector started; its method and path) and each
//! leadership the elector published and when, and answers each request as the test says.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part; fixtures unwrap

use std::time::Duration;

use http::Response;
use kube::client::Body;
use kube_retention_apimock::Received;
use kube_retention_controller::leader::Elector;
use kube_retention_io::clock::Clock;
use kube_retention_runtime::supervise::Supervised;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tower_test::mock::SendResponse;

/// This replica.
pub const ME: &str = "replica-a";
pub const OTHER: &str = "replica-b";
pub const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-retention/leases";
pub const LEASE: &str =
    "/apis/coordination.k8s.io/v1/namespaces/kube-retention/leases/kube-retention-controller";
/// The flag's default: a check every 2 s (a seventh, within 0.5–2 s), a renew deadline of 13 s.
pub const DURATION: Duration = Duration::from_secs(15);
/// Times another replica wrote, long past on this machine's clock: an elector must not compare
/// them with its own clock, only notice when they change.
pub const ACQUIRED: &str = "2020-01-01T00:00:00.000000Z";
pub const RENEWED: &str = "2020-01-01T00:00:10.000000Z";
pub const RENEWED_AGAIN: &str = "2020-01-01T00:00:12.000000Z";

/// A request the API server saw: when (since the elector started), and what.
#[derive(Debug, PartialEq)]
pub struct Call {
    pub at: Duration,
    pub method: String,
    pub path: String,
}

fn call(at: u64, method: &str, path: &str) -> Call {
    Call {
        at: Duration::from_secs(at),
        method: method.into(),
        path: path.into(),
    }
}

pub fn get(at: u64) -> Call {
    call(at, "GET", LEASE)
}

pub fn post(at: u64) -> Call {
    call(at, "POST", LEASES)
}

pub fn put(at: u64) -> Call {
    call(at, "PUT", LEASE)
}

/// Leadership published at `at` seconds.
pub fn published(at: u64, leading: bool) -> (Duration, bool) {
    (Duration::from_secs(at), leading)
}

/// The Lease as the API server holds it.
pub fn lease(holder: Option<&str>, renewed: &str, transitions: i32, version: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-retention-controller", "namespace": "kube-retention",
                     "resourceVersion": version},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": ACQUIRED,
                 "renewTime": renewed, "leaseTransitions": transitions},
    })
}

pub struct ApiServer {
    server: kube_retention_apimock::ApiServer,
    /// Dropped by [`ApiServer::stop`]: the elector's signal to step down.
    leadership: Option<watch::Receiver<bool>>,
    task: Supervised,
    started: Instant,
    pub calls: Vec<Call>,
    /// Each leadership the elector published, with when.
    pub published: Vec<(Duration, bool)>,
}

impl ApiServer {
    /// An elector for [`ME`] with a Lease of [`DURATION`], started now.
    pub fn start() -> Self {
        Self::start_with(|elector| elector)
    }

    /// As [`ApiServer::start`], the elector shaped by `shape` first.
    pub fn start_with(shape: impl FnOnce(Elector) -> Elector) -> Self {
        let (client, server) = kube_retention_apimock::pair();
        let elector = shape(Elector::new(
            client,
            "kube-retention",
            "kube-retention-controller",
            ME,
            DURATION,
            Clock::System,
        ));
        let (leadership, task) = elector.spawn();
        Self {
            server,
            leadership: Some(leadership),
            task,
            started: Instant::now(),
            calls: Vec::new(),
            published: Vec::new(),
        }
    }

    /// The next request, recorded; `None` if none comes within an hour. Leadership published
    /// meanwhile is recorded as it happens.
    pub async fn next(&mut self) -> Option<Received> {
        let Self {
            server,
            leadership,
            started,
            published,
            ..
        } = &mut *self;
        let received = loop {
            let changed = async {
                match leadership {
                    Some(leadership) => leadership.changed().await.map(|()| *leadership.borrow()),
                    None => std::future::pending().await,
                }
            };
            // `next` takes a request whole in one poll (its body is already in memory), so the
            // other branch never cancels it halfway.
            tokio::select! {
                next = server.next() => break next?,
                Ok(leading) = changed => published.push((started.elapsed(), leading)),
            }
        };
        self.calls.push(Call {
            at: self.started.elapsed(),
            method: received.method.clone(),
            path: received.path.clone(),
        });
        Some(received)
    }

    /// Answers the next request with `code` and `body`; returns the request's body.
    pub async fn reply(&mut self, code: u16, body: &Value) -> Value {
        let received = self.next().await.expect("a request");
        let asked = received.body.clone();
        received.reply(code, body);
        asked
    }

    /// Answers the next request with the API server's Status for `code`; returns the request's
    /// body.
    pub async fn refuse(&mut self, code: u16) -> Value {
        let received = self.next().await.expect("a request");
        let asked = received.body.clone();
        received.refuse(code, "refused");
        asked
    }

    /// Takes the next request and leaves it unanswered while the returned sender lives.
    pub async fn hang(&mut self) -> SendResponse<Response<Body>> {
        self.next().await.expect("a request").unanswered()
    }

    /// No Lease yet: the elector creates it and leads (resourceVersion 1). Returns what it posted.
    pub async fn lead(&mut self) -> Value {
        self.refuse(404).await;
        let created = lease(Some(ME), RENEWED, 0, "1");
        self.reply(201, &created).await
    }

    /// Whether no further request comes within an hour.
    pub async fn quiet(&mut self) -> bool {
        self.next().await.is_none()
    }

    /// Waits until the elector publishes `leading`.
    pub async fn until(&mut self, leading: bool) {
        let leadership = self.leadership.as_mut().expect("not stopped");
        leadership.wait_for(|now| *now == leading).await.unwrap();
    }

    /// Drops the leadership receiver, as a stopping controller does.
    pub fn stop(&mut self) {
        self.leadership = None;
    }

    /// Whether the elector's task ends within an hour.
    pub async fn ended(&mut self) -> bool {
        tokio::time::timeout(Duration::from_secs(3600), &mut self.task)
            .await
            .is_ok()
    }
}
