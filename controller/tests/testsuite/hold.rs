//! A policy's `holdWhile` in the controller's state: while its answer for an object is true (or
//! not an answer), the object is not deleted past its deadline nor counted against the limits;
//! the version whose answer is false goes at once; held objects never hold up the others.

use crate::support;

use kube_retention_common::model::object_value;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube_retention_common::governing::Answers;
use kube_retention_state::{PolicyAnswers, PolicyKey, Reason, State};
use serde_json::{Value, json};
use support::{JOB, at, deletes, kind, leader, loaded_policy, object};

/// Held until archived; on an object without annotations the expression cannot answer.
const HOLD: &str = "object.metadata.annotations.archived != 'yes'";

fn key() -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: "archived-first".into(),
    }
}

/// A Job that succeeded at 00:00:01, with `annotations`.
fn job_with(name: &str, created: &str, annotations: Value) -> DynamicObject {
    object(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": created,
                     "annotations": annotations},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    }))
}

/// A Job held (`archived: no`), released (`archived: yes`) or not answerable (no annotation).
fn job(name: &str, created: &str, archived: Option<&str>) -> DynamicObject {
    let annotations = match archived {
        Some(archived) => json!({"archived": archived}),
        None => json!({}),
    };
    job_with(name, created, annotations)
}

/// Judges `object` with its policy's expressions evaluated on it, as the evaluator does, at
/// `now`; answers the deletions due.
fn judged(state: &mut State, object: &DynamicObject, now: &str) -> Vec<(String, Reason)> {
    let value: Value = object_value(&state.kinds()[kind(JOB)].resource, object).unwrap();
    let rules = state.unevaluated(kind(JOB), object)[0].1.clone();
    let answers: PolicyAnswers = [(Arc::new(key()), Answers::compute(&rules, &value))].into();
    let mut actions = state.judged(kind(JOB), object, &value, Some(&answers), at(now));
    actions.extend(state.due(at(now)));
    deletes(&actions)
}

fn with_policy(spec: Value) -> State {
    let mut state = leader();
    state.policy_applied(key(), loaded_policy(spec));
    state
}

#[test]
fn an_object_on_hold_outlives_its_deadline_and_goes_once_the_answer_is_false() {
    let mut state = with_policy(json!({
        "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
        "ttlAfterSucceeded": "2s", "holdWhile": HOLD}));
    let created = "2026-01-01T00:00:00Z";
    let later = "2026-01-02T00:00:00Z";
    assert_eq!(
        judged(&mut state, &job("j", created, Some("no")), later),
        []
    );
    assert_eq!(
        state.next_deadline(),
        None,
        "no wake-up for an object on hold"
    );
    assert_eq!(deletes(&state.due(at("2026-01-03T00:00:00Z"))), []);
    let summary = &state.summaries()[&key()];
    assert_eq!((summary.matched, summary.on_hold), (1, 1));
    assert_eq!(summary.next_deletion, None);
    assert_eq!(state.gauges(at(later)).overdue, 0, "held, not overdue");

    // An expression that cannot answer (no annotation to read) holds too.
    assert_eq!(judged(&mut state, &job("j", created, None), later), []);
    assert_eq!(state.summaries()[&key()].on_hold, 1);

    assert_eq!(
        judged(&mut state, &job("j", created, Some("yes")), later),
        [("j".to_owned(), Reason::Ttl)],
        "the version that answers false goes at once"
    );
}

#[test]
fn held_runs_are_not_counted_against_the_limits_and_never_hold_up_the_others() {
    let mut state = with_policy(json!({
        "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
        "succeededLimit": 1, "holdWhile": HOLD}));
    let now = "2026-01-01T00:00:10Z";
    let oldest = |archived| job("oldest", "2026-01-01T00:00:01Z", Some(archived));
    assert_eq!(judged(&mut state, &oldest("no"), now), []);
    let middle = job("middle", "2026-01-01T00:00:02Z", Some("yes"));
    assert_eq!(
        judged(&mut state, &middle, now),
        [],
        "the held one does not count: one run within the limit of one"
    );
    let newest = job("newest", "2026-01-01T00:00:03Z", Some("yes"));
    assert_eq!(
        judged(&mut state, &newest, now),
        [("middle".to_owned(), Reason::Limit)],
        "the oldest that is not held goes; the held one stays"
    );
    assert_eq!(
        judged(&mut state, &oldest("yes"), now),
        [("oldest".to_owned(), Reason::Limit)],
        "released, it counts again and is over the limit"
    );
}
