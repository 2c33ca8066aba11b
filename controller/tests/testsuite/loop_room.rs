//! The loop against a mocked API server at `--max-tracked-objects`: a namespace's Jobs past
//! the bound are left out, not deleted, and once its tracked Jobs are deleted and gone (room
//! again), its Jobs are listed again in that namespace alone and the one left out is deleted.

use std::time::Duration;

use kube::runtime::watcher::Event;
use kube_retention_common::Registry;
use kube_retention_controller::run::Clock;
use kube_retention_evaluator::{Evaluator, EvaluatorMetrics};
use kube_retention_io::watches::WatchEvent;
use kube_retention_state::State;
use serde_json::{Value, json};

use crate::loop_support;

/// A labelled Job of `namespace`, finished long ago, a second to live.
fn due_job(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                     "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"retention.dev/managed": "true"},
                     "annotations": {"retention.dev/ttl-after-finished": "1s"}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}
    })
}

fn watched(value: Value) -> kube::api::DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn jobs_left_out_for_room_are_listed_again_in_their_namespace_once_there_is_room() {
    let (client, mut api) = kube_retention_apimock::pair();
    let state = State::new(Registry::builtin().clone()).with_max_tracked(2);
    let evaluator = Evaluator::spawn(
        EvaluatorMetrics::default(),
        crate::support::evaluator_program(),
        Default::default(),
    )
    .unwrap();
    let running = loop_support::start_with(state, client, Clock::System, "Job.batch", evaluator);
    for name in ["a", "b", "c"] {
        let event = Event::Apply(watched(due_job("flood", name)));
        let sent = running
            .events
            .send(WatchEvent::Object(running.kind, Ok(event)));
        sent.unwrap();
    }
    let mut lines = Vec::new();
    let mut deleted = Vec::new();
    let mut open = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while deleted.len() < 3 {
        let wait = until.saturating_duration_since(tokio::time::Instant::now());
        let Some(received) = api.next_within(wait).await else {
            break;
        };
        lines.push(received.line());
        if received.query.contains("watch=true") {
            open.push(received.unanswered());
            continue;
        }
        match received.method.as_str() {
            "DELETE" => {
                let name = received.path.rsplit('/').next().unwrap().to_owned();
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
                received.reply(200, &status);
                // Gone, as the watch tells.
                let event = Event::Delete(watched(due_job("flood", &name)));
                let sent = running
                    .events
                    .send(WatchEvent::Object(running.kind, Ok(event)));
                sent.unwrap();
                deleted.push(name);
            }
            "GET" if received.path == "/apis/batch/v1/namespaces/flood/jobs" => {
                let items = [due_job("flood", "c")];
                received.reply(
                    200,
                    &json!({"apiVersion": "batch/v1", "kind": "JobList",
                            "metadata": {"resourceVersion": "8"}, "items": items}),
                );
            }
            _ => received.reply(404, &json!({})),
        }
    }
    running.task.abort();
    drop(open);
    let requests: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|line| !line.contains("watch=true"))
        .collect();
    assert_eq!(requests.len(), 4, "{lines:#?}");
    let (first, then) = requests.split_at(2);
    let mut first = first.to_vec();
    first.sort_unstable();
    assert_eq!(
        first,
        [
            "DELETE /apis/batch/v1/namespaces/flood/jobs/a",
            "DELETE /apis/batch/v1/namespaces/flood/jobs/b",
        ],
        "the two within the bound deleted first, the third left out: {lines:#?}"
    );
    assert!(
        then[0].starts_with("GET /apis/batch/v1/namespaces/flood/jobs"),
        "then the namespace's Jobs listed again: {lines:#?}"
    );
    assert_eq!(
        then[1], "DELETE /apis/batch/v1/namespaces/flood/jobs/c",
        "and the one left out deleted: {lines:#?}"
    );
}
