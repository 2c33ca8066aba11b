//! Which settings govern an object when policies are in play: keep, the object's own
//! annotations and fields, a namespaced policy, a cluster policy; the earlier deadline between
//! policies of one scope; CEL finish rules over built-in ones.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube_retention_common::api::PolicyRules;
use kube_retention_common::governing::{CandidatePolicy, Judgement, Subject, judge};
use kube_retention_common::policies::Rules;
use kube_retention_common::{Expiry, Outcome, Progress, Registry};
use serde_json::{Value, json};

fn rules(spec: Value) -> Rules {
    let spec: PolicyRules = serde_json::from_value(spec).unwrap();
    let (rules, errors) = Rules::read(&spec, None);
    assert_eq!(errors, [], "{spec:?}");
    rules
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

const NOW: &str = "2026-06-01T12:00:00Z";

fn failed_job(annotations: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "annotations": annotations,
                        "creationTimestamp": "2026-06-01T11:00:00Z"},
           "status": {"conditions": [{"type": "Failed", "status": "True",
                                      "lastTransitionTime": "2026-06-01T11:30:00Z"}]}})
}

fn judged(object: &Value, candidates: &[CandidatePolicy<'_>]) -> Judgement {
    let entry = Registry::entry_of(object);
    let labels = BTreeMap::new();
    let subject = Subject {
        entry,
        object,
        labels: &labels,
        namespace_labels: &labels,
        created: Some(at("2026-06-01T11:00:00Z")),
    };
    judge(&subject, candidates, at(NOW))
}

fn jobs(ttl_after_failed: &str) -> Rules {
    rules(
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "ttlAfterFailed": ttl_after_failed}),
    )
}

#[test]
fn annotations_win_over_policies_and_keep_over_everything() {
    let policy = jobs("1m");
    let cluster = [CandidatePolicy {
        namespaced: false,
        rules: &policy,
        answers: None,
    }];
    let own = judged(
        &failed_job(json!({"retention.dev/ttl-after-failed": "1h"})),
        &cluster,
    );
    assert_eq!(
        (own.policy, own.expiry),
        (None, Expiry::At(at("2026-06-01T12:30:00Z")))
    );
    let kept = judged(&failed_job(json!({"retention.dev/keep": "true"})), &cluster);
    assert_eq!((kept.policy, kept.expiry), (None, Expiry::Keep));
    let governed = judged(&failed_job(json!({})), &cluster);
    assert_eq!(
        (governed.policy, governed.expiry),
        (Some(0), Expiry::At(at("2026-06-01T11:31:00Z")))
    );
}

#[test]
fn a_namespaced_policy_wins_over_cluster_ones_and_the_earlier_deadline_within_a_scope() {
    let (long, short, middle) = (jobs("1h"), jobs("1m"), jobs("10m"));
    let candidates = [
        CandidatePolicy {
            namespaced: true,
            rules: &long,
            answers: None,
        },
        CandidatePolicy {
            namespaced: false,
            rules: &short,
            answers: None,
        },
        CandidatePolicy {
            namespaced: true,
            rules: &middle,
            answers: None,
        },
    ];
    let judgement = judged(&failed_job(json!({})), &candidates);
    assert_eq!(judgement.policy, Some(2), "namespaced, and 10m before 1h");
    assert_eq!(
        judgement.overruled,
        [0],
        "the cluster policy is another scope"
    );
    assert_eq!(judgement.expiry, Expiry::At(at("2026-06-01T11:40:00Z")));
    let cluster_only = judged(&failed_job(json!({})), &candidates[1..2]);
    assert_eq!(cluster_only.policy, Some(0));
}

#[test]
fn policies_apply_only_to_their_kinds_selected_labels_and_matches() {
    let selective = rules(
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                 "selector": {"matchLabels": {"team": "a"}},
                                 "ttlAfterFailed": "1m"}),
    );
    let other_kind =
        rules(json!({"resources": [{"apiVersion": "v1", "kind": "Pod"}], "ttl": "1m"}));
    let unmatched = rules(
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                                 "match": "object.metadata.name.startsWith('ci-')",
                                 "ttlAfterFailed": "1m"}),
    );
    for policy in [&selective, &other_kind, &unmatched] {
        let judgement = judged(
            &failed_job(json!({})),
            &[CandidatePolicy {
                namespaced: false,
                rules: policy,
                answers: None,
            }],
        );
        assert_eq!((judgement.policy, judgement.expiry), (None, Expiry::Never));
    }
}

#[test]
fn cel_finish_rules_decide_for_kinds_without_a_built_in_one() {
    let policy = rules(json!({
        "resources": [{"apiVersion": "example.com/v1", "kind": "Widget"}],
        "finished": {"succeeded": "object.status.phase == 'Done'",
                     "at": "timestamp(object.status.finishedAt)"},
        "ttlAfterSucceeded": "5m"}));
    let widget = |phase: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns"},
               "status": {"phase": phase, "finishedAt": "2026-06-01T11:50:00Z"}})
    };
    let candidates = [CandidatePolicy {
        namespaced: false,
        rules: &policy,
        answers: None,
    }];
    let done = judged(&widget("Done"), &candidates);
    assert_eq!(
        done.progress
            .finished()
            .map(|finished| (finished.outcome, finished.at)),
        Some((Outcome::Succeeded, Some(at("2026-06-01T11:50:00Z"))))
    );
    assert_eq!(done.expiry, Expiry::At(at("2026-06-01T11:55:00Z")));
    let running = judged(&widget("Running"), &candidates);
    assert_eq!(
        running.progress,
        Progress::Running,
        "a rule was given and is not met"
    );
    assert_eq!(running.expiry, Expiry::NotYet);
}

#[test]
fn a_snooze_pushes_whatever_deadline_governs_and_never_brings_one_forward() {
    let policy = jobs("1m");
    let cluster = [CandidatePolicy {
        namespaced: false,
        rules: &policy,
        answers: None,
    }];
    let snoozed = judged(
        &failed_job(json!({"retention.dev/snoozed-until": "2026-06-02T00:00:00Z"})),
        &cluster,
    );
    let until = at("2026-06-02T00:00:00Z");
    assert_eq!(
        (snoozed.policy, snoozed.expiry),
        (Some(0), Expiry::At(until))
    );
    assert_eq!(
        snoozed.expiry.snoozed(&snoozed.own.annotations),
        Some(until)
    );
    let own = judged(
        &failed_job(json!({"retention.dev/ttl-after-failed": "1h",
                           "retention.dev/snoozed-until": "2026-06-02T00:00:00Z"})),
        &cluster,
    );
    assert_eq!((own.policy, own.expiry), (None, Expiry::At(until)));
    let past = judged(
        &failed_job(json!({"retention.dev/snoozed-until": "2026-06-01T11:00:00Z"})),
        &cluster,
    );
    assert_eq!(past.expiry, Expiry::At(at("2026-06-01T11:31:00Z")));
    assert_eq!(past.expiry.snoozed(&past.own.annotations), None);
    let kept = judged(
        &failed_job(json!({"retention.dev/keep": "true",
                           "retention.dev/snoozed-until": "2026-06-02T00:00:00Z"})),
        &cluster,
    );
    assert_eq!(kept.expiry, Expiry::Keep);
    let alone = judged(
        &failed_job(json!({"retention.dev/snoozed-until": "2026-06-02T00:00:00Z"})),
        &[],
    );
    assert_eq!(alone.expiry, Expiry::Never, "a snooze gives no deadline");
}

#[test]
fn the_objects_notify_before_wins_over_its_governing_policys() {
    let policy = rules(
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                              "ttlAfterFailed": "1h", "notifyBefore": "10m"}),
    );
    let cluster = [CandidatePolicy {
        namespaced: false,
        rules: &policy,
        answers: None,
    }];
    let governed = judged(&failed_job(json!({})), &cluster);
    assert_eq!(
        governed.notify_before,
        Some(std::time::Duration::from_secs(600))
    );
    let own = judged(
        &failed_job(json!({"retention.dev/notify-before": "2m"})),
        &cluster,
    );
    assert_eq!(own.notify_before, Some(std::time::Duration::from_secs(120)));
    assert_eq!(judged(&failed_job(json!({})), &[]).notify_before, None);
}
