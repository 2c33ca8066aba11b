//! Finish detection for each run-to-completion kind.

use kube_retention_common::kinds::Registry;
use kube_retention_common::{Finished, Outcome, Progress};
use serde_json::json;

fn at(text: &str) -> Option<jiff::Timestamp> {
    Some(text.parse().unwrap())
}

#[test]
fn buildruns_finish_on_the_succeeded_condition() {
    let run = |status: &str, completion: Option<&str>| {
        let mut object = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun", "status": {
            "conditions": [{"type": "Succeeded", "status": status, "lastTransitionTime": "2026-01-01T00:00:05Z"}]}});
        if let Some(completion) = completion {
            object["status"]["completionTime"] = json!(completion);
        }
        Registry::progress_of(&object)
    };
    assert_eq!(
        run("True", Some("2026-01-01T00:00:03Z")),
        Progress::Finished(Finished {
            outcome: Outcome::Succeeded,
            at: at("2026-01-01T00:00:03Z")
        })
    );
    assert_eq!(
        run("False", None),
        Progress::Finished(Finished {
            outcome: Outcome::Failed,
            at: at("2026-01-01T00:00:05Z")
        })
    );
    assert_eq!(run("Unknown", None), Progress::Running);
    let fresh = json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun", "spec": {}});
    assert_eq!(Registry::progress_of(&fresh), Progress::Running);
}

#[test]
fn jobs_finish_on_complete_or_failed() {
    let job = |conditions: serde_json::Value| {
        Registry::progress_of(&json!({"apiVersion": "batch/v1", "kind": "Job", "status": {
            "completionTime": "2026-01-01T00:01:00Z", "conditions": conditions}}))
    };
    assert_eq!(
        job(
            json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:02:00Z"}])
        ),
        Progress::Finished(Finished {
            outcome: Outcome::Succeeded,
            at: at("2026-01-01T00:01:00Z")
        })
    );
    assert_eq!(
        job(
            json!([{"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:02:00Z"}])
        ),
        Progress::Finished(Finished {
            outcome: Outcome::Failed,
            at: at("2026-01-01T00:02:00Z")
        })
    );
    assert_eq!(
        job(
            json!([{"type": "Failed", "status": "False"}, {"type": "Suspended", "status": "True"}])
        ),
        Progress::Running
    );
}

#[test]
fn pods_finish_at_the_last_container_exit() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Failed",
        "initContainerStatuses": [{"state": {"terminated": {"finishedAt": "2026-01-01T00:00:01Z"}}}],
        "containerStatuses": [
            {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:09Z"}}},
            {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:04Z"}}}]}});
    assert_eq!(
        Registry::progress_of(&pod),
        Progress::Finished(Finished {
            outcome: Outcome::Failed,
            at: at("2026-01-01T00:00:09Z")
        })
    );
    let running = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"}});
    assert_eq!(Registry::progress_of(&running), Progress::Running);
}

#[test]
fn openshift_builds_finish_on_their_phase() {
    for (phase, outcome) in [
        ("Complete", Outcome::Succeeded),
        ("Failed", Outcome::Failed),
        ("Error", Outcome::Failed),
        ("Cancelled", Outcome::Failed),
    ] {
        let build = json!({"apiVersion": "build.openshift.io/v1", "kind": "Build",
            "status": {"phase": phase, "completionTimestamp": "2026-01-01T00:00:07Z"}});
        assert_eq!(
            Registry::progress_of(&build),
            Progress::Finished(Finished {
                outcome,
                at: at("2026-01-01T00:00:07Z")
            })
        );
    }
    for phase in ["New", "Pending", "Running"] {
        let build = json!({"apiVersion": "build.openshift.io/v1", "kind": "Build", "status": {"phase": phase}});
        assert_eq!(Registry::progress_of(&build), Progress::Running, "{phase}");
    }
}

#[test]
fn other_kinds_are_not_runs_unless_knative_style() {
    assert_eq!(
        Registry::progress_of(&json!({"apiVersion": "v1", "kind": "ConfigMap"})),
        Progress::NotARun
    );
    assert_eq!(
        Registry::progress_of(&json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build"})),
        Progress::NotARun
    );
    let taskrun = json!({"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "status": {
        "conditions": [{"type": "Succeeded", "status": "True"}]}});
    assert_eq!(
        Registry::progress_of(&taskrun),
        Progress::Finished(Finished {
            outcome: Outcome::Succeeded,
            at: None
        })
    );
}
