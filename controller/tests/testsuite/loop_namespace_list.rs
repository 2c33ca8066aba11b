//! The loop against a mocked API server while a RetentionPolicy's change lists its Jobs in its
//! namespace, and the Jobs' watch tells of changes meanwhile: the list's older word on them
//! never replaces the watch's (`io/src/namespace_lists.rs`). Found by the e2e trial of the
//! archive sink down, which lost Jobs finished while their namespace was being listed: the
//! list's running version, judged last, stood.
//!
//! While the namespace's list is asked for and not yet answered, the watch tells that
//! `finished` finished just now (version 8, due in two seconds) and that `gone` was deleted;
//! the list then answers with both as they were (`finished` running, `gone` finished and due)
//! and with `untouched`, finished and due. `finished` is deleted at the version the watch told,
//! `untouched` at the list's, and `gone`, which the watch said went, is never asked for. Without
//! the guard, `finished` stayed running and was never deleted, and `gone` was.

use std::time::Duration;

use kube::runtime::watcher::Event;
use kube_retention_common::api::RetentionPolicy;
use kube_retention_controller::run::Clock;
use kube_retention_evaluator::{Evaluator, EvaluatorMetrics};
use kube_retention_io::watches::WatchEvent;
use serde_json::{Value, json};

use crate::loop_support;

/// A Job at `version`, running, or finished at `finished` (an RFC 3339 time).
fn job(name: &str, version: &str, finished: Option<&str>) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
                     "resourceVersion": version, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"retention.dev/managed": "true"}},
        "status": {"active": 1}
    });
    if let Some(at) = finished {
        job["status"] = json!({"completionTime": at, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": at}]});
    }
    job
}

/// A finishing time whose deadline has long passed.
const LONG_AGO: &str = "2026-01-01T00:00:01Z";

fn policy() -> RetentionPolicy {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "jobs", "namespace": "team-a", "uid": "uid-policy", "generation": 1},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "ttlAfterSucceeded": "2s"}
    }))
    .unwrap()
}

fn watched(value: Value) -> kube::api::DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn a_namespace_list_never_replaces_what_the_watch_told_while_it_was_under_way() {
    let (client, mut api) = kube_retention_apimock::pair();
    let running = loop_support::start(
        client,
        Clock::System,
        "Job.batch",
        Evaluator::spawn(
            EvaluatorMetrics::default(),
            crate::support::evaluator_program(),
            Default::default(),
        )
        .unwrap(),
    );
    running
        .events
        .send(WatchEvent::Policy(Ok(Event::Apply(policy()))))
        .unwrap();
    let mut deleted: Vec<(String, Value)> = Vec::new();
    let mut lines = Vec::new();
    let mut open = Vec::new();
    let mut listed = false;
    // Until `finished` is deleted (two seconds after the watch told it finished), then a second
    // more for a DELETE of `gone`; fifteen seconds at most.
    let mut until = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::time::Instant::now() < until {
        let wait = until.saturating_duration_since(tokio::time::Instant::now());
        let Some(received) = api.next_within(wait).await else {
            break;
        };
        lines.push(received.line());
        let path = received.path.clone();
        if received.query.contains("watch=true") {
            open.push(received.unanswered());
            continue;
        }
        match received.method.as_str() {
            "GET" if path == "/apis/batch/v1/namespaces/team-a/jobs" => {
                assert!(!listed, "one list of the namespace: {lines:#?}");
                listed = true;
                // The watch tells of both before the list is answered, and the loop takes it.
                // `finished` finished just now: due in two seconds, long after the list.
                let now = jiff::Timestamp::now().to_string();
                for event in [
                    Event::Apply(watched(job("finished", "8", Some(&now)))),
                    Event::Delete(watched(job("gone", "9", Some(LONG_AGO)))),
                ] {
                    running
                        .events
                        .send(WatchEvent::Object(running.kind, Ok(event)))
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                let items = vec![
                    job("finished", "7", None),
                    job("gone", "7", Some(LONG_AGO)),
                    job("untouched", "7", Some(LONG_AGO)),
                ];
                received.reply(
                    200,
                    &json!({"apiVersion": "batch/v1", "kind": "JobList",
                            "metadata": {"resourceVersion": "7"}, "items": items}),
                );
            }
            "DELETE" => {
                let name = path.rsplit('/').next().unwrap().to_owned();
                if name == "finished" {
                    until = tokio::time::Instant::now() + Duration::from_secs(1);
                }
                deleted.push((name, received.body["preconditions"].clone()));
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
                received.reply(200, &status);
            }
            _ => received.reply(200, &json!({})),
        }
    }
    running.task.abort();
    drop(open);
    deleted.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(listed, "the policy listed its namespace's Jobs: {lines:#?}");
    assert_eq!(
        deleted,
        vec![
            (
                "finished".to_owned(),
                json!({"uid": "uid-finished", "resourceVersion": "8"})
            ),
            (
                "untouched".to_owned(),
                json!({"uid": "uid-untouched", "resourceVersion": "7"})
            ),
        ],
        "the watch's versions stand; the list's only where the watch told nothing: {lines:#?}"
    );
}
