//! The deciding setting agrees with the deadline, over generated Jobs, BuildRuns and OpenShift
//! Builds with any mix of annotations (some invalid), own, embedded and snapshot fields, outcomes
//! and a RetentionPolicy: the value written where `setting::deciding` points, counted from
//! creation (`ttl`) or from the finish time, is the deadline the model computed; `keep` and a
//! hand-written `expires-at` are named as such; and nothing is named where nothing decides.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube_retention_common::annotations::{
    EXPIRES_AT, KEEP, STAMPED, TTL, TTL_AFTER_FAILED, TTL_AFTER_FINISHED, TTL_AFTER_SUCCEEDED,
};
use kube_retention_common::api::PolicyRules;
use kube_retention_common::duration;
use kube_retention_common::expiry::Decider;
use kube_retention_common::governing::{CandidatePolicy, Subject, judge};
use kube_retention_common::json::{field, metadata_entry};
use kube_retention_common::policies::Rules;
use kube_retention_common::setting::{self, Origin, PolicyField};
use kube_retention_common::{Expiry, Registry};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const CREATED: &str = "2026-06-01T10:00:00Z";
const NOW: &str = "2026-06-01T12:00:00Z";

/// A duration as users write it, in one of several spellings, or now and then not at all valid.
fn written() -> impl Strategy<Value = String> {
    let seconds = 0u64..20_000;
    prop_oneof![
        8 => (seconds, 0..4u8).prop_map(|(n, form)| match form {
            0 => format!("{n}s"),
            1 => format!("{}m{}s", n / 60, n % 60),
            2 => format!("{}h{}m", n / 3600, n / 60 % 60),
            _ => format!("{}h", n as f64 / 3600.0),
        }),
        1 => prop_oneof![Just("1d".to_owned()), Just("-5m".to_owned()), Just("soon".to_owned())],
    ]
}

fn ttls() -> impl Strategy<Value = [Option<String>; 2]> {
    [
        proptest::option::of(written()),
        proptest::option::of(written()),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    /// 0: Job, 1: BuildRun, 2: OpenShift Build.
    kind: u8,
    /// ttl, after succeeded, after failed, after finished.
    annotations: [Option<String>; 4],
    keep: bool,
    /// A hand-written `expires-at` (minutes from creation), and whether it is the stamp.
    expires_at: Option<(i64, bool)>,
    /// Own, embedded and snapshot TTLs (succeeded, failed); seconds for an OpenShift Build.
    fields: [[Option<String>; 2]; 3],
    seconds: [Option<i64>; 2],
    /// None: running; else succeeded or not, and when (minutes after creation) if said.
    finished: Option<(bool, Option<i64>)>,
    /// A RetentionPolicy's ttl, ttlAfterSucceeded, ttlAfterFailed, valid or not.
    policy: Option<[Option<String>; 3]>,
}

fn case() -> impl Strategy<Value = Case> {
    let annotations = [
        proptest::option::of(written()),
        proptest::option::of(written()),
        proptest::option::of(written()),
        proptest::option::of(written()),
    ];
    let seconds = [
        proptest::option::of(-5i64..20_000),
        proptest::option::of(-5i64..20_000),
    ];
    let finished = proptest::option::of((any::<bool>(), proptest::option::of(0i64..300)));
    let policy = [
        proptest::option::of(written()),
        proptest::option::of(written()),
        proptest::option::of(written()),
    ];
    (
        (0u8..3, annotations, prop::bool::weighted(0.1)),
        proptest::option::of((-600i64..600, any::<bool>())),
        ([ttls(), ttls(), ttls()], seconds),
        (finished, proptest::option::of(policy)),
    )
        .prop_map(
            |((kind, annotations, keep), expires_at, (fields, seconds), (finished, policy))| Case {
                kind,
                annotations,
                keep,
                expires_at,
                fields,
                seconds,
                finished,
                policy,
            },
        )
}

fn minutes_after_creation(minutes: i64) -> Timestamp {
    CREATED.parse::<Timestamp>().unwrap() + SignedDuration::from_mins(minutes)
}

fn retention([succeeded, failed]: &[Option<String>; 2]) -> Value {
    json!({"ttlAfterSucceeded": succeeded, "ttlAfterFailed": failed})
}

fn object(case: &Case) -> Value {
    let mut annotations = Map::new();
    let keys = [
        TTL,
        TTL_AFTER_SUCCEEDED,
        TTL_AFTER_FAILED,
        TTL_AFTER_FINISHED,
    ];
    for (key, value) in keys.into_iter().zip(&case.annotations) {
        if let Some(value) = value {
            annotations.insert(key.to_owned(), json!(value));
        }
    }
    if case.keep {
        annotations.insert(KEEP.to_owned(), json!("true"));
    }
    if let Some((minutes, stamp)) = case.expires_at {
        let at = minutes_after_creation(minutes).to_string();
        if stamp {
            annotations.insert(STAMPED.to_owned(), json!(at));
        }
        annotations.insert(EXPIRES_AT.to_owned(), json!(at));
    }
    let at = |minutes: Option<i64>| minutes.map(|m| minutes_after_creation(m).to_string());
    let metadata = json!({"name": "o", "namespace": "team-a", "annotations": annotations,
                          "creationTimestamp": CREATED,
                          "labels": {"build.shipwright.io/name": "hello"}});
    let [own, embedded, snapshot] = &case.fields;
    match (case.kind, case.finished) {
        (0, finished) => {
            let conditions = finished.map(|(succeeded, minutes)| {
                let kind = if succeeded { "Complete" } else { "Failed" };
                json!([{"type": kind, "status": "True", "lastTransitionTime": at(minutes)}])
            });
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                   "status": {"conditions": conditions}})
        }
        (1, finished) => {
            let (status, time) = match finished {
                Some((true, minutes)) => ("True", at(minutes)),
                Some((false, minutes)) => ("False", at(minutes)),
                None => ("Unknown", None),
            };
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun", "metadata": metadata,
                   "spec": {"retention": retention(own),
                            "build": {"spec": {"retention": retention(embedded)}}},
                   "status": {"completionTime": time, "buildSpec": {"retention": retention(snapshot)},
                              "conditions": [{"type": "Succeeded", "status": status}]}})
        }
        (_, finished) => {
            let (phase, time) = match finished {
                Some((true, minutes)) => ("Complete", at(minutes)),
                Some((false, minutes)) => ("Failed", at(minutes)),
                None => ("Running", None),
            };
            let [succeeded, failed] = case.seconds;
            json!({"apiVersion": "build.openshift.io/v1", "kind": "Build", "metadata": metadata,
                   "spec": {"successfulBuildTTLSeconds": succeeded, "failedBuildTTLSeconds": failed},
                   "status": {"phase": phase, "completionTimestamp": time}})
        }
    }
}

/// The case's policy, for the object's kind, where it is a valid one.
fn policy(case: &Case, object: &Value) -> Option<(PolicyRules, Rules)> {
    let [ttl, succeeded, failed] = case.policy.clone()?;
    let spec = json!({"resources": [{"apiVersion": object["apiVersion"], "kind": object["kind"]}],
                      "ttl": ttl, "ttlAfterSucceeded": succeeded, "ttlAfterFailed": failed});
    let spec: PolicyRules = serde_json::from_value(spec).unwrap();
    let (rules, errors) = Rules::read(&spec, None);
    errors.is_empty().then_some((spec, rules))
}

/// A TTL as written: a Go duration, or whole seconds.
fn parse(text: &str) -> Duration {
    duration::parse(text)
        .ok()
        .or_else(|| text.parse().ok().map(Duration::from_secs))
        .unwrap_or_else(|| panic!("{text:?} is no TTL"))
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let object = object(case);
    let policy = policy(case, &object);
    let candidates: Vec<CandidatePolicy<'_>> = policy
        .iter()
        .map(|(_, rules)| CandidatePolicy {
            namespaced: true,
            rules,
            answers: None,
        })
        .collect();
    let labels = BTreeMap::new();
    let created: Timestamp = CREATED.parse().unwrap();
    let now: Timestamp = NOW.parse().unwrap();
    let subject = Subject {
        entry: Registry::entry_of(&object),
        object: &object,
        labels: &labels,
        namespace_labels: &labels,
        created: Some(created),
    };
    let judgement = judge(&subject, &candidates, now);
    let setting = setting::deciding(&judgement, &subject);
    let deadline = match judgement.expiry {
        Expiry::Never | Expiry::NotYet => {
            prop_assert_eq!(setting, None);
            return Ok(());
        }
        Expiry::Keep => None,
        Expiry::Deadline(at) | Expiry::At(at) => Some(at),
    };
    let setting = setting.expect("a setting decides");
    let (text, from_creation) = match &setting.origin {
        Origin::Policy { index, field } => {
            prop_assert_eq!(*index, 0);
            prop_assert_eq!(&setting.written, &None);
            let (spec, _) = policy.as_ref().unwrap();
            (
                field.written(spec).unwrap().to_owned(),
                *field == PolicyField::Ttl,
            )
        }
        Origin::Annotation(key) => {
            let written = metadata_entry(&object, "annotations", key).map(str::to_owned);
            prop_assert_eq!(&setting.written, &written);
            (written.unwrap(), *key == TTL)
        }
        Origin::Field { path } | Origin::Inherited { path, .. } => {
            let value = field(&object, path).unwrap();
            let written = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            prop_assert_eq!(setting.written.as_ref(), Some(&written));
            (written, false)
        }
    };
    match (setting.decider, deadline) {
        (Decider::Keep, None) => {
            prop_assert_eq!(setting.origin, Origin::Annotation(KEEP));
            prop_assert_eq!(text, "true");
        }
        (Decider::ExpiresAt(at), Some(deadline)) => {
            prop_assert_eq!(setting.origin, Origin::Annotation(EXPIRES_AT));
            prop_assert_eq!(text.parse::<Timestamp>().unwrap(), at);
            prop_assert_eq!(at, deadline);
        }
        (Decider::Ttl(ttl) | Decider::AfterFinish { ttl, .. }, Some(deadline)) => {
            prop_assert_eq!(parse(&text), ttl);
            prop_assert_eq!(from_creation, matches!(setting.decider, Decider::Ttl(_)));
            let base = match judgement.progress.finished() {
                Some(finished) if !from_creation => finished.at.unwrap_or(now),
                _ => created,
            };
            prop_assert_eq!(base + SignedDuration::try_from(ttl).unwrap(), deadline);
        }
        (decider, deadline) => prop_assert!(false, "{decider:?} for {deadline:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_deciding_setting_gives_the_deadline(case in case()) {
        check(&case)?;
    }
}
