//! Which setting decided an object's deadline, as `setting::deciding` names it: the precedence
//! of annotations over fields over inherited values, the outcome's own annotation over
//! `ttl-after-finished`, the earlier of `ttl` and the finish TTL, `keep`, a hand-written
//! `expires-at`, policies — and the words `kubectl retention explain` says them in.

use std::collections::BTreeMap;
use std::time::Duration;

use kube_retention_common::annotations::{
    EXPIRES_AT, KEEP, TTL, TTL_AFTER_FAILED, TTL_AFTER_FINISHED, TTL_AFTER_SUCCEEDED,
};
use kube_retention_common::api::PolicyRules;
use kube_retention_common::expiry::Decider;
use kube_retention_common::governing::{CandidatePolicy, Subject, judge};
use kube_retention_common::own_settings::TtlSource;
use kube_retention_common::policies::Rules;
use kube_retention_common::setting::{self, Origin, Parent, PolicyField, Setting};
use kube_retention_common::{Expiry, Outcome, Registry};
use serde_json::{Value, json};

const CREATED: &str = "2026-06-01T10:00:00Z";
const FINISHED: &str = "2026-06-01T11:00:00Z";

/// The deciding setting of `object` under `candidates`, with the expiry judged.
fn decided(object: &Value, candidates: &[CandidatePolicy<'_>]) -> (Expiry, Option<Setting>) {
    let labels = BTreeMap::new();
    let subject = Subject {
        entry: Registry::entry_of(object),
        object,
        labels: &labels,
        namespace_labels: &labels,
        created: Some(CREATED.parse().unwrap()),
    };
    let judgement = judge(
        &subject,
        candidates,
        "2026-06-01T12:00:00Z".parse().unwrap(),
    );
    let setting = setting::deciding(&judgement, &subject);
    (judgement.expiry, setting)
}

/// Where the deciding setting of `object` (no policies) is written, and its value as written.
fn origin(object: &Value) -> Option<(Origin, Option<String>)> {
    let (_, setting) = decided(object, &[]);
    setting.map(|setting| (setting.origin, setting.written))
}

fn annotation(key: &'static str, value: &str) -> Option<(Origin, Option<String>)> {
    Some((Origin::Annotation(key), Some(value.to_owned())))
}

fn field(path: &str, value: &str) -> Option<(Origin, Option<String>)> {
    let path = path.to_owned();
    Some((Origin::Field { path }, Some(value.to_owned())))
}

fn inherited(path: &str, value: &str) -> Option<(Origin, Option<String>)> {
    let parent = Some(Parent {
        kind: "Build",
        name: Some("hello".to_owned()),
    });
    let path = path.to_owned();
    Some((Origin::Inherited { path, parent }, Some(value.to_owned())))
}

fn job(annotations: Value, outcome: Option<Outcome>) -> Value {
    let conditions = match outcome {
        Some(Outcome::Succeeded) => json!([{"type": "Complete", "status": "True"}]),
        Some(Outcome::Failed) => {
            json!([{"type": "Failed", "status": "True", "lastTransitionTime": FINISHED}])
        }
        None => json!([]),
    };
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "annotations": annotations, "creationTimestamp": CREATED},
           "status": {"completionTime": FINISHED, "conditions": conditions}})
}

/// A failed BuildRun of Build `hello`.
fn failed_buildrun(annotations: Value, spec: Value, snapshot: Value) -> Value {
    json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
           "metadata": {"name": "r", "annotations": annotations,
                        "labels": {"build.shipwright.io/name": "hello"}},
           "spec": spec,
           "status": {"completionTime": FINISHED, "buildSpec": {"retention": snapshot},
                      "conditions": [{"type": "Succeeded", "status": "False"}]}})
}

#[test]
fn annotations_come_before_own_fields_before_inherited_ones() {
    let everything = json!({"retention": {"ttlAfterFailed": "20m"},
                            "build": {"spec": {"retention": {"ttlAfterFailed": "30m"}}}});
    let snapshot = json!({"ttlAfterFailed": "40m"});
    let both = json!({TTL_AFTER_FAILED: "5m", TTL_AFTER_FINISHED: "10m"});
    let object = failed_buildrun(both, everything.clone(), snapshot.clone());
    assert_eq!(origin(&object), annotation(TTL_AFTER_FAILED, "5m"));
    let finished = json!({TTL_AFTER_FINISHED: "10m"});
    let object = failed_buildrun(finished, everything.clone(), snapshot.clone());
    assert_eq!(origin(&object), annotation(TTL_AFTER_FINISHED, "10m"));
    let object = failed_buildrun(json!({}), everything, snapshot.clone());
    assert_eq!(
        origin(&object),
        field("spec.retention.ttlAfterFailed", "20m")
    );
    let embedded = json!({"build": {"spec": {"retention": {"ttlAfterFailed": "30m"}}}});
    let object = failed_buildrun(json!({}), embedded, snapshot.clone());
    let path = "spec.build.spec.retention.ttlAfterFailed";
    assert_eq!(origin(&object), inherited(path, "30m"));
    // An invalid embedded value is denied at admission and ignored here: the snapshot decides.
    let bogus = json!({"build": {"spec": {"retention": {"ttlAfterFailed": "1w"}}}});
    let object = failed_buildrun(json!({}), bogus, snapshot);
    let path = "status.buildSpec.retention.ttlAfterFailed";
    assert_eq!(origin(&object), inherited(path, "40m"));
}

#[test]
fn the_outcomes_own_annotation_wins_over_ttl_after_finished() {
    let both = json!({TTL_AFTER_SUCCEEDED: "2h", TTL_AFTER_FINISHED: "30m"});
    let succeeded = job(both.clone(), Some(Outcome::Succeeded));
    assert_eq!(origin(&succeeded), annotation(TTL_AFTER_SUCCEEDED, "2h"));
    let (expiry, setting) = decided(&succeeded, &[]);
    assert_eq!(expiry, Expiry::At("2026-06-01T13:00:00Z".parse().unwrap()));
    assert_eq!(
        setting.unwrap().decider,
        Decider::AfterFinish {
            outcome: Outcome::Succeeded,
            source: TtlSource::Annotation(TTL_AFTER_SUCCEEDED),
            ttl: Duration::from_secs(7200),
        }
    );
    let failed = job(both, Some(Outcome::Failed));
    assert_eq!(origin(&failed), annotation(TTL_AFTER_FINISHED, "30m"));
}

#[test]
fn the_earlier_of_ttl_and_the_finish_ttl_decides() {
    let ttl_first = json!({TTL: "30m", TTL_AFTER_FINISHED: "1h"});
    assert_eq!(
        origin(&job(ttl_first, Some(Outcome::Failed))),
        annotation(TTL, "30m")
    );
    let finish_first = json!({TTL: "1.5h", TTL_AFTER_FINISHED: "1s"});
    let object = job(finish_first, Some(Outcome::Failed));
    assert_eq!(origin(&object), annotation(TTL_AFTER_FINISHED, "1s"));
    // On a tie, the TTL from creation.
    let tie = job(
        json!({TTL: "1h", TTL_AFTER_FINISHED: "0s"}),
        Some(Outcome::Failed),
    );
    assert_eq!(origin(&tie), annotation(TTL, "1h"));
    // Running: only `ttl` gives a deadline yet.
    let running = job(json!({TTL: "1.5h", TTL_AFTER_FINISHED: "1s"}), None);
    assert_eq!(origin(&running), annotation(TTL, "1.5h"));
}

#[test]
fn keep_and_hand_written_deadlines_and_nothing() {
    let kept = job(json!({KEEP: "true", TTL: "1m"}), Some(Outcome::Failed));
    assert_eq!(origin(&kept), annotation(KEEP, "true"));
    let at = "2026-07-01T00:00:00+02:00";
    let hand_written = job(json!({EXPIRES_AT: at}), Some(Outcome::Failed));
    assert_eq!(origin(&hand_written), annotation(EXPIRES_AT, at));
    // kube-retention's own stamp, left behind by a TTL that is gone, decides nothing.
    let stale = job(
        json!({EXPIRES_AT: at, "retention.dev/stamped": at}),
        Some(Outcome::Failed),
    );
    assert_eq!(decided(&stale, &[]), (Expiry::Never, None));
    assert_eq!(origin(&job(json!({}), Some(Outcome::Failed))), None);
    let running = job(json!({TTL_AFTER_FINISHED: "1h"}), None);
    assert_eq!(decided(&running, &[]), (Expiry::NotYet, None));
}

#[test]
fn names_seconds_fields_as_written() {
    let build = json!({"apiVersion": "build.openshift.io/v1", "kind": "Build",
                       "spec": {"failedBuildTTLSeconds": 60},
                       "status": {"phase": "Failed", "completionTimestamp": FINISHED}});
    assert_eq!(origin(&build), field("spec.failedBuildTTLSeconds", "60"));
}

#[test]
fn names_the_policy_field_that_decided() {
    let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                      "ttl": "4h", "ttlAfterFailed": "120m"});
    let spec: PolicyRules = serde_json::from_value(spec).unwrap();
    let (rules, errors) = Rules::read(&spec, None);
    assert_eq!(errors, []);
    let candidates = [CandidatePolicy {
        namespaced: true,
        rules: &rules,
        answers: None,
    }];
    let (_, setting) = decided(&job(json!({}), Some(Outcome::Failed)), &candidates);
    let setting = setting.unwrap();
    let field = PolicyField::TtlAfterFailed;
    assert_eq!(setting.origin, Origin::Policy { index: 0, field });
    assert_eq!(setting.written, None);
    let said = setting.said(|index| (index == 0).then_some(("RetentionPolicy team-a/jobs", &spec)));
    assert_eq!(
        said.to_string(),
        "RetentionPolicy team-a/jobs: ttlAfterFailed 120m"
    );
    // The object's own settings come first, and a running Job only has the policy's `ttl`.
    let own = job(json!({TTL_AFTER_FAILED: "1h"}), Some(Outcome::Failed));
    assert_eq!(
        decided(&own, &candidates).1.unwrap().origin,
        Origin::Annotation(TTL_AFTER_FAILED)
    );
    let (_, running) = decided(&job(json!({}), None), &candidates);
    let field = PolicyField::Ttl;
    assert_eq!(running.unwrap().origin, Origin::Policy { index: 0, field });
}

#[test]
fn says_each_setting_as_written() {
    let said = |object: &Value| decided(object, &[]).1.unwrap().said(|_| None).to_string();
    let finished = job(json!({TTL_AFTER_FINISHED: "30m"}), Some(Outcome::Failed));
    assert_eq!(
        said(&finished),
        "annotation retention.dev/ttl-after-finished: 30m"
    );
    let own = failed_buildrun(
        json!({}),
        json!({"retention": {"ttlAfterFailed": "2h"}}),
        json!({}),
    );
    assert_eq!(said(&own), "spec.retention.ttlAfterFailed: 2h");
    let snapshot = failed_buildrun(json!({}), json!({}), json!({"ttlAfterFailed": "10m"}));
    assert_eq!(
        said(&snapshot),
        "status.buildSpec.retention.ttlAfterFailed: 10m (from Build hello)"
    );
}
