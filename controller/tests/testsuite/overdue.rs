//! The backlog the `KubeRetentionBacklogGrowing` alert watches (`kube_retention_overdue_objects`):
//! finished runs past their deadline that are still here, and only those.

use kube_retention_state::Failure;
use serde_json::json;

use crate::support;

use support::*;

const FINISHED: Option<(&str, &str)> = Some(("True", "2026-01-01T00:00:00Z"));

#[test]
fn overdue_counts_finished_runs_past_their_deadline_until_they_are_gone() {
    let mut state = leader();
    let created = "2026-01-01T00:00:00Z";
    let now = at("2026-01-01T00:00:01Z");
    state.applied(
        kind(BUILDRUN),
        &buildrun("done", "u1", "1", created, FINISHED, json!({})),
        now,
    );
    state.applied(
        kind(BUILDRUN),
        &buildrun("running", "u2", "1", created, None, json!({})),
        now,
    );
    let kept = json!({"metadata": {"annotations": {"retention.dev/keep": "true"}}});
    state.applied(
        kind(BUILDRUN),
        &buildrun("kept", "u3", "1", created, FINISHED, kept),
        now,
    );
    assert_eq!(state.gauges(now).overdue, 0, "the 3 s TTL has not passed");

    let late = at("2026-01-01T00:00:10Z");
    assert_eq!(
        state.gauges(late).overdue,
        1,
        "only the finished, unkept run is overdue"
    );
    let deletes = deletes(&state.due(late));
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(
        state.gauges(late).overdue,
        1,
        "a DELETE in flight is still backlog"
    );

    let key = kube_retention_state::ObjectKey {
        kind: kind(BUILDRUN),
        namespace: "ns".into(),
        name: "done".into(),
    };
    state.delete_failed(&key, Failure::Unavailable("etcd timeout".into()), late);
    assert_eq!(
        state.gauges(late).overdue,
        1,
        "a backing-off DELETE is backlog"
    );

    state.removed(kind(BUILDRUN), "ns", "done");
    assert_eq!(state.gauges(late).overdue, 0, "gone");
}

#[test]
fn one_reading_of_the_gauges_counts_tracked_by_kind_backoff_and_backlog() {
    let mut state = leader();
    let created = "2026-01-01T00:00:00Z";
    let now = at("2026-01-01T00:00:01Z");
    for (name, uid) in [("a", "u1"), ("b", "u2")] {
        state.applied(
            kind(BUILDRUN),
            &buildrun(name, uid, "1", created, FINISHED, json!({})),
            now,
        );
    }
    let gauges = state.gauges(now);
    assert_eq!(gauges.tracked[&kind(BUILDRUN)], 2);
    assert_eq!(gauges.tracked[&kind(JOB)], 0, "every kind has a reading");
    assert_eq!((gauges.in_backoff, gauges.overdue), (0, 0));

    let late = at("2026-01-01T00:00:10Z");
    assert_eq!(deletes(&state.due(late)).len(), 2);
    let key = kube_retention_state::ObjectKey {
        kind: kind(BUILDRUN),
        namespace: "ns".into(),
        name: "a".into(),
    };
    state.delete_failed(&key, Failure::Unavailable("etcd timeout".into()), late);
    let gauges = state.gauges(late);
    assert_eq!(
        (gauges.in_backoff, gauges.overdue),
        (1, 2),
        "the failed DELETE backs off; it and the one in flight are both backlog"
    );
}
