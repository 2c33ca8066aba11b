//! Reading and validating retention policies of every kind, through the public API.

use std::time::Duration;

use kube_retention_common::{OwnSettings, RunPolicy, Ttls, field_error::summary};
use serde_json::{Value, json};

fn build(retention: Value) -> Value {
    json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build", "metadata": {"name": "b"},
           "spec": {"retention": retention}})
}

fn messages(object: &Value) -> Vec<String> {
    OwnSettings::read(object)
        .1
        .iter()
        .map(ToString::to_string)
        .collect()
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn reads_a_shipwright_build() {
    let (policy, errors) = OwnSettings::read(&build(json!({
        "ttlAfterSucceeded": "1h", "ttlAfterFailed": "1.5h",
        "succeededLimit": 100, "failedLimit": 1, "atBuildDeletion": true,
    })));
    assert_eq!(errors, []);
    assert_eq!(
        policy.runs,
        RunPolicy {
            ttls: Ttls {
                after_succeeded: Some(HOUR),
                after_failed: Some(HOUR * 3 / 2)
            },
            succeeded_limit: Some(100),
            failed_limit: Some(1),
            at_build_deletion: true,
        }
    );
}

#[test]
fn names_field_value_and_rule() {
    assert_eq!(
        messages(&build(json!({"ttlAfterFailed": "1d"}))),
        [
            "spec.retention.ttlAfterFailed: \"1d\" is not a duration: use h, m, s, ms, us or ns, e.g. \"36h\" or \"1h30m\""
        ]
    );
    assert_eq!(
        messages(&build(json!({"succeededLimit": 101}))),
        [
            "spec.retention.succeededLimit: 101 is above the limit of 100: use a whole number from 1 to 100, e.g. 10"
        ]
    );
    assert_eq!(
        messages(&build(json!({"failedLimit": 0}))),
        ["spec.retention.failedLimit: 0 is below 1: use a whole number from 1 to 100, e.g. 10"]
    );
}

#[test]
fn reports_all_errors_of_an_object_together() {
    let object = build(json!({
        "ttlAfterFailed": "2 weeks", "ttlAfterSucceeded": "-1h", "succeededLimit": 101,
        "failedLimit": "ten", "atBuildDeletion": "yes",
    }));
    let (_, errors) = OwnSettings::read(&object);
    assert_eq!(errors.len(), 5, "{errors:#?}");
    let text = summary(&errors);
    assert!(
        text.starts_with("5 retention settings are invalid:\n"),
        "{text}"
    );
    for path in [
        "ttlAfterFailed",
        "ttlAfterSucceeded",
        "succeededLimit",
        "failedLimit",
        "atBuildDeletion",
    ] {
        assert!(
            text.contains(&format!("spec.retention.{path}: ")),
            "{path} in {text}"
        );
    }
}

#[test]
fn wrong_types_are_errors_not_panics() {
    for retention in [
        json!("1h"),
        json!(5),
        json!([1]),
        json!({"ttlAfterFailed": 3600}),
    ] {
        let errors = messages(&build(retention.clone()));
        assert_eq!(errors.len(), 1, "{retention}: {errors:?}");
        assert!(errors[0].starts_with("spec.retention"), "{errors:?}");
    }
}

#[test]
fn reads_a_buildrun_with_its_own_and_inherited_ttls() {
    let object = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
        "spec": {
            "retention": {"ttlAfterSucceeded": "10m"},
            "build": {"spec": {"retention": {"ttlAfterSucceeded": "1h", "ttlAfterFailed": "2h", "failedLimit": 3}}},
        },
        "status": {"buildSpec": {"retention": {"ttlAfterFailed": "5h"}}},
    });
    let (policy, errors) = OwnSettings::read(&object);
    assert_eq!(errors, []);
    assert_eq!(
        policy.own,
        Ttls {
            after_succeeded: Some(Duration::from_secs(600)),
            after_failed: None
        }
    );
    assert_eq!(
        policy.inherited,
        Ttls {
            after_succeeded: Some(HOUR),
            after_failed: Some(2 * HOUR)
        }
    );
    assert_eq!(
        policy.ttls(),
        Ttls {
            after_succeeded: Some(Duration::from_secs(600)),
            after_failed: Some(2 * HOUR)
        }
    );
}

#[test]
fn falls_back_to_the_status_snapshot_and_never_denies_it() {
    let object = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun", "spec": {"build": {"name": "b"}},
        "status": {"buildSpec": {"retention": {"ttlAfterFailed": "5h", "ttlAfterSucceeded": "bogus"}}},
    });
    let (policy, errors) = OwnSettings::read(&object);
    assert_eq!(errors, []);
    assert_eq!(
        policy.ttls(),
        Ttls {
            after_succeeded: None,
            after_failed: Some(5 * HOUR)
        }
    );
}

#[test]
fn validates_the_embedded_build_of_a_buildrun() {
    let object = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
        "spec": {"retention": {"ttlAfterFailed": "1w"},
                 "build": {"spec": {"retention": {"succeededLimit": 500}}}},
    });
    let errors = messages(&object);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("spec.retention.ttlAfterFailed: \"1w\""));
    assert!(
        errors[1]
            .starts_with("spec.build.spec.retention.succeededLimit: 500 is above the limit of 100")
    );
}

#[test]
fn annotations_come_before_fields() {
    let object = json!({
        "apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
        "metadata": {"annotations": {"retention.dev/ttl-after-finished": "5m", "retention.dev/ttl-after-failed": "1m"}},
        "spec": {"retention": {"ttlAfterSucceeded": "10m", "ttlAfterFailed": "10m"}},
    });
    let (policy, _) = OwnSettings::read(&object);
    assert_eq!(
        policy.ttls(),
        Ttls {
            after_succeeded: Some(Duration::from_secs(300)),
            after_failed: Some(Duration::from_secs(60))
        }
    );
}

#[test]
fn reads_openshift_builds_and_buildconfigs() {
    let object = json!({"apiVersion": "build.openshift.io/v1", "kind": "Build",
                        "spec": {"successfulBuildTTLSeconds": 60, "failedBuildTTLSeconds": 0}});
    let (policy, errors) = OwnSettings::read(&object);
    assert_eq!(errors, []);
    assert_eq!(
        policy.own,
        Ttls {
            after_succeeded: Some(Duration::from_secs(60)),
            after_failed: Some(Duration::ZERO)
        }
    );

    let config = json!({"apiVersion": "build.openshift.io/v1", "kind": "BuildConfig", "spec": {
        "defaultSuccessfulBuildTTLSeconds": 3600, "successfulBuildsHistoryLimit": 0, "failedBuildsHistoryLimit": 100}});
    let (policy, errors) = OwnSettings::read(&config);
    assert_eq!(errors, []);
    assert_eq!(policy.runs.ttls.after_succeeded, Some(HOUR));
    assert_eq!(
        (policy.runs.succeeded_limit, policy.runs.failed_limit),
        (Some(0), Some(100))
    );

    let bad = json!({"apiVersion": "build.openshift.io/v1", "kind": "BuildConfig", "spec": {
        "defaultFailedBuildTTLSeconds": -1, "failedBuildsHistoryLimit": 101, "successfulBuildsHistoryLimit": 2.5}});
    let errors = messages(&bad);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors.iter().any(|e| e == "spec.defaultFailedBuildTTLSeconds: -1 is negative: use a whole number of seconds from 0 to 2147483647, e.g. 3600"));
    assert!(errors.iter().any(|e| e == "spec.failedBuildsHistoryLimit: 101 is above the limit of 100: use a whole number from 0 to 100, e.g. 10"));
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("spec.successfulBuildsHistoryLimit: 2.5 is not a whole number"))
    );
}

#[test]
fn any_kind_is_governed_by_annotations() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"annotations": {"retention.dev/ttl": "soon"}}});
    assert_eq!(
        messages(&object),
        [format!(
            "metadata.annotations[retention.dev/ttl]: \"soon\" {}",
            kube_retention_common::duration::DurationError::Syntax
        )]
    );
    let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let (policy, errors) = OwnSettings::read(&plain);
    assert_eq!(errors, []);
    assert!(!policy.has_ttl());
}
