//! The whole controller, built as the binary builds it ([`Controller::build`] from a
//! [`Config`] the flags make), on a mocked API server and paused time: start-up asks the
//! version, discovery and its permissions before anything is listed, the watches list one
//! finished Job whose deadline is a minute after start, and the controller deletes it then — at
//! its deadline, with the uid and resourceVersion it listed as preconditions — with nothing of
//! the test reaching inside.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Parser;
use jiff::Timestamp;
use kube_retention_apimock::{ApiServer, Received, pair};
use kube_retention_common::annotations::{EXPIRES_AT, MANAGED_LABEL};
use kube_retention_controller::args::Args;
use kube_retention_controller::{Config, Controller};
use kube_retention_io::clock::Clock;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// When the Job may go, after the test's start.
const DUE_AFTER: Duration = Duration::from_secs(60);

/// The flags of a controller alone on its mocked cluster: no election, no periodic discovery,
/// lists in pages, an ephemeral metrics port; every other flag at its default.
fn config() -> Config {
    let args = Args::try_parse_from([
        "kube-retention-controller",
        "--leader-election=false",
        "--discovery-interval=0s",
        "--initial-list=pages",
        "--metrics-address=127.0.0.1:0",
        "--events=false",
        "--cleaners=false",
    ])
    .expect("the flags parse");
    Config::from_args(&args)
}

/// A Job that finished before the start and expires [`DUE_AFTER`] it.
fn finished_job(start: Timestamp) -> Value {
    let expires = start + DUE_AFTER;
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": "nightly-1", "namespace": "team-a", "uid": "uid-1", "resourceVersion": "41",
            "creationTimestamp": (start - Duration::from_secs(600)).to_string(),
            "labels": {MANAGED_LABEL: "true"},
            "annotations": {EXPIRES_AT: expires.to_string()},
        },
        "spec": {"template": {"spec": {"containers": []}}},
        "status": {
            "succeeded": 1,
            "completionTime": (start - Duration::from_secs(60)).to_string(),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    })
}

fn resources(group_version: &str, plural: &str, kind: &str) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": [{"name": plural, "singularName": "", "namespaced": true, "kind": kind,
                          "verbs": ["list", "watch", "delete", "patch"]}]})
}

fn list(items: Vec<Value>) -> Value {
    json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "50"},
           "items": items})
}

/// A discovery request (`/api`, `/apis`, a group version), not a resource's.
fn is_discovery(path: &str) -> bool {
    let segments = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .count();
    match path.split('/').nth(1) {
        Some("api") => segments <= 2,
        Some("apis") => segments <= 3,
        _ => true,
    }
}

/// What the stand-in API server saw of the run.
#[derive(Debug)]
struct Deleted {
    path: String,
    preconditions: Value,
    after: Duration,
}

/// Every request the stand-in received, `METHOD path`, in order.
type Asked = Arc<Mutex<Vec<String>>>;

/// Serves Jobs and Pods, grants every review, lists the finished Job where the managed label is
/// selected, holds every watch open, and reports each DELETE; answers 404 to the rest.
async fn stand_in(
    mut server: ApiServer,
    start: Timestamp,
    deleted: mpsc::UnboundedSender<Deleted>,
    asked: Asked,
) {
    let began = Instant::now();
    let mut watches: Vec<Received> = Vec::new();
    while let Some(received) = server.next().await {
        let request = format!("{} {}", received.method, received.path);
        asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        let query = received
            .query
            .replace("%2F", "/")
            .replace("%3D", "=")
            .replace("%21", "!");
        let path = received.path.clone();
        match (received.method.as_str(), path.as_str()) {
            (_, _) if query.contains("watch=true") || query.contains("watch=1") => {
                watches.push(received)
            }
            ("GET", "/version") => received.reply(
                200,
                &json!({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}),
            ),
            ("GET", "/api/v1") => received.reply(200, &resources("v1", "pods", "Pod")),
            ("GET", "/apis/batch/v1") => received.reply(200, &resources("batch/v1", "jobs", "Job")),
            ("POST", path) if path.ends_with("accessreviews") => {
                let mut review = received.body.clone();
                review["status"] = json!({"allowed": true});
                received.reply(201, &review);
            }
            ("GET", "/apis/batch/v1/jobs")
                if query.contains(&format!("labelSelector={MANAGED_LABEL}=true")) =>
            {
                received.reply(200, &list(vec![finished_job(start)]));
            }
            ("GET", path) if !is_discovery(path) => received.reply(200, &list(Vec::new())),
            ("DELETE", _) => {
                let preconditions = received.body["preconditions"].clone();
                let _ = deleted.send(Deleted {
                    path,
                    preconditions,
                    after: began.elapsed(),
                });
                received.reply(
                    200,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                );
            }
            _ => received.refuse(404, "the server could not find the requested resource"),
        }
    }
    drop(watches);
}

#[tokio::test(start_paused = true)]
async fn the_built_controller_deletes_a_listed_job_at_its_deadline_with_preconditions() {
    let start = Timestamp::now();
    let (client, server) = pair();
    let (deleted_tx, mut deleted) = mpsc::unbounded_channel();
    let asked = Asked::default();
    let serving = tokio::spawn(stand_in(server, start, deleted_tx, asked.clone()));
    let controller = Controller::build(config(), client, Clock::following_tokio(start))
        .await
        .expect("the controller builds against the stand-in");
    let running = tokio::spawn(controller.run(std::future::pending()));
    let deletion = tokio::time::timeout(DUE_AFTER * 3, deleted.recv())
        .await
        .expect("a DELETE within three minutes of virtual time")
        .expect("the stand-in is serving");
    assert_eq!(
        deletion.path,
        "/apis/batch/v1/namespaces/team-a/jobs/nightly-1"
    );
    assert_eq!(
        deletion.preconditions,
        json!({"uid": "uid-1", "resourceVersion": "41"})
    );
    assert!(
        deletion.after >= DUE_AFTER && deletion.after < DUE_AFTER + Duration::from_secs(1),
        "deleted {:?} after start, due {DUE_AFTER:?}",
        deletion.after
    );
    let asked = asked.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let first = |request: &str| {
        asked
            .iter()
            .position(|asked| asked.starts_with(request))
            .unwrap_or_else(|| panic!("never asked {request}: {asked:?}"))
    };
    let listed = first("GET /apis/batch/v1/jobs");
    for before in [
        "GET /version",
        "GET /api/v1",
        "GET /apis/batch/v1",
        "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    ] {
        assert!(
            first(before) < listed,
            "{before} asked before the Jobs are listed: {asked:?}"
        );
    }
    running.abort();
    let _ = running.await;
    serving.abort();
}
