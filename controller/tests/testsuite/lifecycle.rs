//! What changes the controller's view over time, without a cluster: a parent's limits (the
//! newest runs kept, a lowered limit applied at once), leadership, and relists.

use kube_retention_common::Registry;
use kube_retention_common::StampChange;
use kube_retention_state::{Action, Reason, Stamping, State};
use serde_json::json;

use crate::support;

use support::*;

#[test]
fn limits_keep_the_newest_and_apply_a_lowered_limit_at_once() {
    let mut state = leader();
    let now = at("2026-01-01T01:00:00Z");
    let build = |limit: u32| {
        object(
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
        "metadata": {"name": "app", "namespace": "ns", "uid": "build-uid", "resourceVersion": "1"},
        "spec": {"retention": {"succeededLimit": limit}}}),
        )
    };
    assert_eq!(state.applied(kind(BUILD), &build(2), now), []);
    let mut actions = Vec::new();
    for (index, created) in ["00:01", "00:02", "00:03", "00:04"].iter().enumerate() {
        let created = format!("2026-01-01T{created}:00Z");
        let run = buildrun(
            &format!("r{index}"),
            &format!("u{index}"),
            "1",
            &created,
            Some(("True", &created)),
            json!({"spec": {"retention": null}}),
        );
        actions.extend(state.applied(kind(BUILDRUN), &run, now));
    }
    let running = buildrun(
        "running",
        "u9",
        "1",
        "2026-01-01T00:00:00Z",
        None,
        json!({"spec": {"retention": null}}),
    );
    actions.extend(state.applied(kind(BUILDRUN), &running, now));
    let mut deleted = deletes(&actions);
    deleted.sort();
    assert_eq!(
        deleted,
        [
            ("r0".to_owned(), Reason::Limit),
            ("r1".to_owned(), Reason::Limit)
        ]
    );

    let lowered = state.applied(kind(BUILD), &build(1), now);
    assert_eq!(deletes(&lowered), [("r2".to_owned(), Reason::Limit)]);
}

#[test]
fn a_follower_acts_only_once_it_leads() {
    let mut state = State::new(Registry::builtin().clone()).with_stamping(Stamping::Finished);
    let run = buildrun(
        "r",
        "u",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({"spec": {"retention": {"ttlAfterSucceeded": "1h"}}}),
    );
    assert_eq!(
        state.applied(kind(BUILDRUN), &run, at("2026-01-01T00:00:01Z")),
        []
    );
    assert_eq!(state.due(at("2026-01-01T02:00:00Z")), []);
    let actions = state.set_leader(true, at("2026-01-01T00:30:00Z"));
    assert!(
        matches!(&actions[..], [Action::Stamp { change: StampChange::Set(stamp), .. }] if *stamp == at("2026-01-01T01:00:00Z")),
        "{actions:?}"
    );
    assert_eq!(
        deletes(&state.set_leader(false, at("2026-01-01T02:00:00Z"))),
        []
    );
    let actions = state.set_leader(true, at("2026-01-01T02:00:00Z"));
    assert_eq!(deletes(&actions), [("r".to_owned(), Reason::Ttl)]);
}

#[test]
fn a_relist_forgets_what_is_gone() {
    let mut state = leader();
    let finished = Some(("True", "2026-01-01T00:00:00Z"));
    state.applied(
        kind(BUILDRUN),
        &buildrun(
            "stays",
            "u1",
            "1",
            "2026-01-01T00:00:00Z",
            finished,
            json!({}),
        ),
        at("2026-01-01T00:00:01Z"),
    );
    state.applied(
        kind(BUILDRUN),
        &buildrun(
            "gone",
            "u2",
            "1",
            "2026-01-01T00:00:00Z",
            finished,
            json!({}),
        ),
        at("2026-01-01T00:00:01Z"),
    );
    state.relist_started(kind(BUILDRUN));
    state.applied(
        kind(BUILDRUN),
        &buildrun(
            "stays",
            "u1",
            "2",
            "2026-01-01T00:00:00Z",
            finished,
            json!({}),
        ),
        at("2026-01-01T00:00:01Z"),
    );
    assert_eq!(
        state.relist_done(kind(BUILDRUN), at("2026-01-01T00:00:09Z")),
        []
    );
    let tracked = state.gauges(at("2026-01-01T00:00:09Z")).tracked;
    assert_eq!(tracked[&kind(BUILDRUN)], 1);
    assert_eq!(tracked[&kind(JOB)], 0);
    assert_eq!(
        deletes(&state.due(at("2026-01-01T00:10:00Z"))),
        [("stays".to_owned(), Reason::Ttl)]
    );
}

#[test]
fn by_default_a_finished_run_costs_one_request_the_delete_and_stamp_finished_adds_the_stamp() {
    let run = buildrun(
        "r",
        "u",
        "1",
        "2026-01-01T00:00:00Z",
        Some(("True", "2026-01-01T00:00:00Z")),
        json!({"spec": {"retention": {"ttlAfterSucceeded": "1h"}}}),
    );
    let seen = at("2026-01-01T00:00:01Z");
    let mut stamping = stamping_leader();
    let actions = stamping.applied(kind(BUILDRUN), &run, seen);
    assert!(
        matches!(&actions[..], [Action::Stamp { change: StampChange::Set(stamp), .. }] if *stamp == at("2026-01-01T01:00:00Z")),
        "with --stamp=finished the deadline is stamped: {actions:?}"
    );

    let mut state = State::new(Registry::builtin().clone());
    assert_eq!(state.set_leader(true, seen), []);
    assert_eq!(state.applied(kind(BUILDRUN), &run, seen), [], "no PATCH");
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T01:00:00Z")));
    let actions = state.due(at("2026-01-01T01:00:00Z"));
    assert_eq!(
        actions.len(),
        1,
        "the DELETE, and nothing else: {actions:?}"
    );
    assert_eq!(deletes(&actions), [("r".to_owned(), Reason::Ttl)]);
}
