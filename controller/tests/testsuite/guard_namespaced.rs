//! A RetentionPolicy's blast-radius guard and the list its change causes: the policy governs its
//! own namespace only, so that namespace's list of the kind completes its count (a tenant's
//! edits list its own objects, not the cluster's), and a list of another namespace does not.

use crate::support;

use std::collections::HashSet;

use kube_retention_state::{Approval, LoadedPolicy, PolicyKey, Standing, State};
use serde_json::json;
use support::{JOB, at, deletes, kind, loaded_policy};

const NOW: &str = "2026-01-02T00:00:00Z";

fn key() -> PolicyKey {
    PolicyKey {
        namespace: Some("ns".into()),
        name: "jobs".into(),
    }
}

fn standing(state: &State) -> Standing {
    state.summaries()[&key()].guard.clone().unwrap().standing
}

fn job(namespace: &str, name: &str) -> kube::api::DynamicObject {
    support::succeeded_job(namespace, name)
}

#[test]
fn a_policys_count_completes_with_its_own_namespaces_list_and_no_other() {
    let now = at(NOW);
    let mut state = State::new(kube_retention_common::Registry::builtin().clone())
        .with_max_immediate_deletions(100);
    assert_eq!(state.set_leader(true, now), []);
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttlAfterSucceeded": "1s"});
    let loaded = LoadedPolicy {
        generation: Some(2),
        approval: Approval::default(),
        ..loaded_policy(spec)
    };
    state.policy_applied(key(), loaded);
    assert_eq!(standing(&state), Standing::Counting);
    let judged = HashSet::new();
    // Another namespace's list says nothing of this policy's objects.
    state.namespace_relist_started(kind(JOB), "other");
    state.applied(kind(JOB), &job("other", "theirs"), now);
    state.namespace_relist_done(kind(JOB), "other");
    assert_eq!(state.settled(kind(JOB), now, &judged), []);
    assert_eq!(standing(&state), Standing::Counting);
    // Its own namespace's list completes the count: within the threshold, what it held goes.
    state.namespace_relist_started(kind(JOB), "ns");
    let mut actions = state.applied(kind(JOB), &job("ns", "mine"), now);
    state.namespace_relist_done(kind(JOB), "ns");
    actions.extend(state.settled(kind(JOB), now, &judged));
    actions.extend(state.due(now));
    assert_eq!(standing(&state), Standing::Accepted);
    let deleted: Vec<String> = deletes(&actions)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(deleted, ["mine"]);
}
