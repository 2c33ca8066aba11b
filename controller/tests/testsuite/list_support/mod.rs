//! Fixtures shared by the tests of how a watch lists ([`kube_retention_io::initial_list`]):
//! Jobs, pages and watch bodies as the API server sends them, and what a watch sends downstream.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part; fixtures unwrap

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube_retention_apimock::{ApiServer, Received, pair};
use kube_retention_io::initial_list::{Events, InitialList, Lists};
use serde_json::{Value, json};

pub fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7"}})
}

/// A page with Jobs of these names, the list's last.
pub fn job_list(names: &[&str]) -> Value {
    let items: Vec<Value> = names.iter().map(|name| job(name)).collect();
    json!({"apiVersion": "batch/v1", "kind": "JobList",
           "metadata": {"resourceVersion": "9"}, "items": items})
}

/// A watch's body: one event a line.
pub fn events(lines: &[Value]) -> Vec<u8> {
    lines
        .iter()
        .map(|line| format!("{line}\n"))
        .collect::<String>()
        .into_bytes()
}

pub fn added(name: &str) -> Value {
    json!({"type": "ADDED", "object": job(name)})
}

/// The bookmark that ends a streamed list.
pub fn initial_events_end() -> Value {
    json!({"type": "BOOKMARK", "object": {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"resourceVersion": "9",
                        "annotations": {"k8s.io/initial-events-end": "true"}}}})
}

/// `--initial-list=stream` against a mocked API server: its lists, a Jobs watch through them,
/// and the server.
pub fn streaming_jobs() -> (Lists, Events<Job>, ApiServer) {
    let (client, server) = pair();
    let lists = Lists::new(InitialList::Stream, 500);
    let watch = jobs_watch(&lists, &Api::all(client));
    (lists, watch, server)
}

pub fn jobs_watch(lists: &Lists, api: &Api<Job>) -> Events<Job> {
    lists.watch(api.clone(), watcher::Config::default(), "Job.batch".into())
}

/// The next request, which must be on Jobs.
pub async fn next(server: &mut ApiServer) -> Received {
    let request = server.next().await.expect("a request");
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/apis/batch/v1/jobs");
    request
}

pub fn is_streamed_list(request: &Received) -> bool {
    let query = &request.query;
    query.contains("watch=true")
        && query.contains("sendInitialEvents=true")
        && query.contains("resourceVersionMatch=NotOlderThan")
}

pub fn is_page(request: &Received) -> bool {
    !request.query.contains("watch=true") && request.query.contains("limit=500")
}

/// The names of the objects in `events`' next `count` events, `init`, `done` for the list's
/// start and end, `error` for an error.
pub async fn read(events: &mut Events<Job>, count: usize) -> Vec<String> {
    let mut read = Vec::new();
    for _ in 0..count {
        let Ok(event) = events.next().await.expect("an event") else {
            read.push("error".to_owned());
            continue;
        };
        read.push(match event {
            Event::Init => "init".to_owned(),
            Event::InitApply(job) | Event::Apply(job) => job.metadata.name.unwrap(),
            Event::InitDone => "done".to_owned(),
            Event::Delete(job) => format!("deleted {}", job.metadata.name.unwrap()),
        });
    }
    read
}

/// An ERROR event: the watch's resource version is too old (compacted); the watcher lists again.
pub fn gone() -> Value {
    json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "metadata": {},
           "status": "Failure", "reason": "Expired", "code": 410,
           "message": "too old resource version: 9 (12)"}})
}

/// The watch resumed after a list, from its resource version, lists nothing.
pub fn is_resumed_watch(request: &Received) -> bool {
    let query = &request.query;
    query.contains("watch=true")
        && !query.contains("sendInitialEvents")
        && query.contains("resourceVersion=9")
}
