//! `explain`'s answers for one object at a time, without a cluster.

#![allow(clippy::unwrap_used)] // fixtures

use serde_json::{Value, json};

use super::*;

fn explained(object: Value, policies: &Policies) -> Explanation {
    // The object's own resource, as `kubectl retention explain` resolves it.
    let resource = match Registry::builtin().lookup(&object) {
        Lookup::Listed(entry) => entry.resource.clone(),
        _ => {
            let api_version = object["apiVersion"].as_str().unwrap();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = object["kind"].as_str().unwrap();
            Resource::new(group, version, kind, &format!("{}s", kind.to_lowercase()))
        }
    };
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    let now = "2026-06-01T12:00:00Z".parse().unwrap();
    explain(Registry::builtin(), &resource, &object, policies, now)
}

/// No policies, or one RetentionPolicy `team-a/NAME`.
fn policies(policy: Option<(&str, Value)>) -> Policies {
    let mut policies = Policies {
        valid: BTreeMap::new(),
        namespace_labels: BTreeMap::new(),
    };
    if let Some((name, spec)) = policy {
        let policy: RetentionPolicy = serde_json::from_value(json!({
            "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}))
        .unwrap();
        policies.add(&policy);
        assert_eq!(policies.valid.len(), 1, "{policy:?} is invalid");
    }
    policies
}

/// A Job in team-a that failed at 11:00, with `annotations`.
fn failed_job(annotations: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "team-a", "annotations": annotations},
           "status": {"conditions": [{"type": "Failed", "status": "True",
                      "lastTransitionTime": "2026-06-01T11:00:00Z"}]}})
}

fn buildrun(annotations: Value, spec: Value, status: Value) -> Value {
    json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
           "metadata": {"name": "run", "namespace": "team-a", "annotations": annotations,
                        "labels": {"build.shipwright.io/name": "hello"}},
           "spec": spec, "status": status})
}

#[test]
fn says_an_inherited_setting_and_the_build_it_comes_from() {
    let failed = json!({"completionTime": "2026-06-01T11:00:00Z",
                        "buildSpec": {"retention": {"ttlAfterFailed": "10m"}},
                        "conditions": [{"type": "Succeeded", "status": "False"}]});
    let it = explained(buildrun(json!({}), json!({}), failed), &policies(None));
    assert_eq!(
        it.source,
        "status.buildSpec.retention.ttlAfterFailed: 10m (from Build hello)"
    );
    assert_eq!(it.deadline, Some("2026-06-01T11:10:00Z".parse().unwrap()));
    assert_eq!(
        serde_json::to_value(&it).unwrap()["setting"],
        json!({"kind": "inherited", "name": "status.buildSpec.retention.ttlAfterFailed",
               "value": "10m", "from": "Build hello"})
    );
}

#[test]
fn says_a_policy_field_as_its_spec_writes_it() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": "j", "namespace": "team-a"},
                     "status": {"conditions": [{"type": "Failed", "status": "True",
                                "lastTransitionTime": "2026-06-01T11:00:00Z"}]}});
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttlAfterFailed": "120m"});
    let it = explained(job, &policies(Some(("jobs", spec))));
    assert_eq!(
        it.source,
        "RetentionPolicy team-a/jobs: ttlAfterFailed 120m"
    );
    assert_eq!(it.deadline, Some("2026-06-01T13:00:00Z".parse().unwrap()));
}

#[test]
fn says_an_object_is_on_hold_while_the_policys_hold_while_is_true() {
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttlAfterFailed": "10m",
                      "holdWhile": "!has(object.metadata.annotations.archived)"});
    let policies = policies(Some(("jobs", spec)));
    let held = explained(failed_job(json!({})), &policies);
    assert!(held.on_hold);
    assert_eq!(held.deadline, Some("2026-06-01T11:10:00Z".parse().unwrap()));
    assert_eq!(
        held.note.as_deref(),
        Some(
            "on hold: spec.holdWhile of RetentionPolicy team-a/jobs holds it \
             (!has(object.metadata.annotations.archived)); deleted once that is false, past \
             its deadline or not"
        )
    );
    let archived = explained(failed_job(json!({"archived": "yes"})), &policies);
    assert!(!archived.on_hold);
    assert_eq!(archived.note, None);
}

#[test]
fn says_what_will_decide_once_a_run_finishes() {
    let annotations = json!({"retention.dev/ttl-after-failed": "5m"});
    let spec = json!({"retention": {"ttlAfterSucceeded": "1h"}});
    let it = explained(buildrun(annotations, spec, json!({})), &policies(None));
    assert_eq!(
        it.source,
        "once it finishes: spec.retention.ttlAfterSucceeded: 1h if it succeeds; \
         annotation retention.dev/ttl-after-failed: 5m if it fails"
    );
    let finished = json!({"retention.dev/ttl-after-finished": "30m"});
    let it = explained(buildrun(finished, json!({}), json!({})), &policies(None));
    assert_eq!(
        it.source,
        "once it finishes: annotation retention.dev/ttl-after-finished: 30m"
    );
    assert_eq!(it.setting, None);
}

#[test]
fn judges_with_the_controllers_kinds_leaving_a_disabled_kind_alone() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": "j", "namespace": "team-a",
                                  "annotations": {"retention.dev/ttl-after-finished": "1h"}},
                     "status": {"conditions": [{"type": "Complete", "status": "True",
                                "lastTransitionTime": "2026-06-01T11:00:00Z"}]}});
    let object: DynamicObject = serde_json::from_value(job).unwrap();
    let now = "2026-06-01T12:00:00Z".parse().unwrap();
    let jobs = Resource::new("batch", "v1", "Job", "jobs");
    let judged = |kinds: &Registry| explain(kinds, &jobs, &object, &policies(None), now);
    assert_eq!(
        judged(Registry::builtin()).deadline,
        Some("2026-06-01T12:00:00Z".parse().unwrap())
    );
    let selection = kube_retention_common::kinds::KindSelection {
        disabled_kinds: vec!["Job.batch".into()],
        ..Default::default()
    };
    let it = judged(&selection.registry().unwrap());
    assert_eq!((it.state.as_str(), it.deadline), ("left-alone", None));
    assert_eq!(
        it.source,
        "nothing: the controller leaves Job.batch alone (--disable-kind)"
    );
}

#[test]
fn says_a_snooze_and_when_the_notice_goes() {
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttlAfterFailed": "2h", "notifyBefore": "30m"});
    let policies = policies(Some(("jobs", spec)));
    let plain = explained(failed_job(json!({})), &policies);
    assert_eq!(
        plain.deadline,
        Some("2026-06-01T13:00:00Z".parse().unwrap())
    );
    assert_eq!(
        plain.notice_at,
        Some("2026-06-01T12:30:00Z".parse().unwrap())
    );
    assert_eq!(plain.snoozed_until, None);
    assert_eq!(
        plain.note.as_deref(),
        Some("notice at 2026-06-01T12:30:00Z, 30m0s ahead")
    );
    let snoozed = explained(
        failed_job(json!({"retention.dev/snoozed-until": "2026-06-02T00:00:00Z"})),
        &policies,
    );
    assert_eq!(
        snoozed.deadline,
        Some("2026-06-02T00:00:00Z".parse().unwrap())
    );
    assert_eq!(
        snoozed.source,
        "RetentionPolicy team-a/jobs: ttlAfterFailed 2h"
    );
    assert_eq!(
        snoozed.note.as_deref(),
        Some(
            "snoozed until 2026-06-02T00:00:00Z (retention.dev/snoozed-until); notice at \
             2026-06-01T23:30:00Z, 30m0s ahead"
        )
    );
    let json = serde_json::to_value(&snoozed).unwrap();
    assert_eq!(
        (&json["snoozedUntil"], &json["noticeAt"]),
        (
            &json!("2026-06-02T00:00:00Z"),
            &json!("2026-06-01T23:30:00Z")
        )
    );
}
