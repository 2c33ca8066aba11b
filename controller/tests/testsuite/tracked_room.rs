//! The bound on tracked runs (`--max-tracked-objects`), through the state as the loop feeds it:
//! a namespace that floods the room is the one that goes without; another's runs are tracked
//! and deleted on time, and what was left out is listed again once there is room.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use kube::api::DynamicObject;
use kube_retention_state::State;
use proptest::prelude::*;

use crate::support::*;

/// A Job in `namespace` that finished on New Year's Day, to be deleted a minute later.
fn finished_job(namespace: &str, name: &str) -> DynamicObject {
    object(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"retention.dev/ttl-after-finished": "1m"}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]},
    }))
}

fn leading_within(max: usize) -> State {
    let mut state =
        State::new(kube_retention_common::Registry::builtin().clone()).with_max_tracked(max);
    assert_eq!(state.set_leader(true, at("2026-01-01T00:00:00Z")), []);
    state
}

fn tracked(state: &State, now: Timestamp) -> usize {
    state.gauges(now).tracked.values().sum()
}

#[test]
fn a_namespace_flooding_the_room_goes_without_and_another_is_deleted_on_time() {
    let now = at("2026-01-01T00:00:02Z");
    let mut state = leading_within(10);
    for index in 0..15 {
        state.applied(kind(JOB), &finished_job("flood", &format!("f{index}")), now);
    }
    let gauges = state.gauges(now);
    assert_eq!(gauges.tracked[&kind(JOB)], 10, "the bound");
    assert_eq!(gauges.left_out, 5, "the flood's last five left out");
    state.applied(kind(JOB), &finished_job("team-b", "b"), now);
    assert_eq!(
        tracked(&state, now),
        10,
        "one of the flood's let go of for it"
    );
    assert_eq!(state.gauges(now).left_out, 6);
    assert!(
        state.left_out_to_list().is_empty(),
        "no room yet: nothing to list again"
    );
    let due = deletes(&state.due(at("2026-01-01T00:01:01Z")));
    assert!(
        due.iter().any(|(name, _)| name == "b"),
        "team-b's Job deleted at its deadline: {due:?}"
    );
    assert_eq!(due.len(), 10, "{due:?}");
    for (name, _) in &due {
        let namespace = if name == "b" { "team-b" } else { "flood" };
        state.removed(kind(JOB), namespace, name);
    }
    assert_eq!(
        state.left_out_to_list(),
        [(kind(JOB), "flood".into())],
        "the flood's Jobs listed again, now that there is room"
    );
    assert!(state.left_out_to_list().is_empty(), "asked for once");
}

#[test]
fn a_run_already_tracked_is_judged_afresh_at_the_bound() {
    let now = at("2026-01-01T00:00:02Z");
    let mut state = leading_within(1);
    state.applied(kind(JOB), &finished_job("a", "j"), now);
    let mut changed = finished_job("a", "j");
    changed.metadata.resource_version = Some("2".into());
    state.applied(kind(JOB), &changed, now);
    assert_eq!(state.gauges(now).left_out, 0);
    assert_eq!(deletes(&state.due(at("2026-01-01T00:01:01Z"))).len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever Jobs namespaces create and delete, no more than the bound are tracked, and
    /// a namespace that never holds more than its even share of the room (the bound over the
    /// namespaces) has every Job deleted at its deadline.
    #[test]
    fn the_bound_holds_and_a_namespace_within_its_share_is_never_left_out(
        max in 4usize..40,
        steps in proptest::collection::vec((0usize..4, proptest::bool::weighted(0.8)), 0..400),
    ) {
        let now = at("2026-01-01T00:00:02Z");
        let mut state = leading_within(max);
        let namespaces = ["light", "ns-1", "ns-2", "ns-3"];
        let share = max / namespaces.len();
        let mut created: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut next = 0;
        for (index, creating) in steps {
            let namespace = namespaces[index];
            let names = created.entry(namespace).or_default();
            if creating {
                if namespace == "light" && names.len() >= share {
                    continue;
                }
                next += 1;
                let name = format!("j{next}");
                state.applied(kind(JOB), &finished_job(namespace, &name), now);
                names.push(name);
            } else if let Some(name) = names.pop() {
                state.removed(kind(JOB), namespace, &name);
            }
            prop_assert!(tracked(&state, now) <= max);
        }
        let deadline = now + SignedDuration::from_mins(2);
        let due = deletes(&state.due(deadline));
        let deleted: Vec<String> = due.into_iter().map(|(name, _)| name).collect();
        for name in created.get("light").into_iter().flatten() {
            prop_assert!(deleted.contains(name), "light's {} not deleted: {:?}", name, deleted);
        }
    }
}
