//! Which writes make retention stricter, and so need the writer's own permission to delete.

use std::time::Duration;

use kube_retention_common::Registry;
use kube_retention_common::Ttls;
use kube_retention_common::tightening::{Reach, Tightening, tightenings};
use serde_json::{Value, json};

fn config_map(annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "team-a", "annotations": annotations}})
}

fn buildrun(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
           "metadata": {"name": "r", "namespace": "team-a"}, "spec": spec, "status": status})
}

fn build(retention: Value) -> Value {
    json!({"apiVersion": "shipwright.io/v1beta1", "kind": "Build",
           "metadata": {"name": "b", "namespace": "team-a"}, "spec": {"retention": retention}})
}

fn found(old: Option<&Value>, new: &Value) -> Vec<(String, String, Reach)> {
    found_with_parent(old, new, Ttls::default())
}

fn found_with_parent(
    old: Option<&Value>,
    new: &Value,
    parent: Ttls,
) -> Vec<(String, String, Reach)> {
    let entry = Registry::builtin().entry_for(new);
    tightenings(entry, old, new, parent)
        .into_iter()
        .map(|Tightening { path, value, reach }| (path, value, reach))
        .collect()
}

fn annotation(key: &str, value: &str) -> (String, String, Reach) {
    (
        format!("metadata.annotations[retention.dev/{key}]"),
        format!("\"{value}\""),
        Reach::Itself,
    )
}

#[test]
fn adding_or_shortening_a_ttl_tightens_lengthening_or_removing_does_not() {
    let one_day = config_map(json!({"retention.dev/ttl": "24h"}));
    assert_eq!(found(None, &one_day), [annotation("ttl", "24h")]);
    let one_hour = config_map(json!({"retention.dev/ttl": "1h"}));
    assert_eq!(found(Some(&one_day), &one_hour), [annotation("ttl", "1h")]);
    assert_eq!(found(Some(&one_hour), &one_day), []);
    assert_eq!(found(Some(&one_hour), &config_map(json!({}))), []);
    assert_eq!(found(Some(&one_hour), &one_hour), []);
}

#[test]
fn removing_a_specific_ttl_so_a_shorter_general_one_applies_tightens() {
    let old = config_map(json!({"retention.dev/ttl-after-succeeded": "10h",
                                "retention.dev/ttl-after-finished": "1h"}));
    let new = config_map(json!({"retention.dev/ttl-after-finished": "1h"}));
    assert_eq!(
        found(Some(&old), &new),
        [annotation("ttl-after-finished", "1h")]
    );
}

#[test]
fn an_earlier_expires_at_tightens_but_kube_retentions_own_stamp_is_not_the_writers() {
    let later = config_map(json!({"retention.dev/expires-at": "2026-12-01T00:00:00Z"}));
    let earlier = config_map(json!({"retention.dev/expires-at": "2026-11-30T00:00:00Z"}));
    assert_eq!(
        found(Some(&later), &earlier),
        [annotation("expires-at", "2026-11-30T00:00:00Z")]
    );
    assert_eq!(found(Some(&earlier), &later), []);
    let stamped = config_map(json!({"retention.dev/ttl": "1h",
                                    "retention.dev/expires-at": "2026-11-30T00:00:00Z",
                                    "retention.dev/stamped": "2026-11-30T00:00:00Z"}));
    assert_eq!(found(None, &stamped), [annotation("ttl", "1h")]);
}

#[test]
fn taking_keep_away_tightens_adding_it_does_not() {
    let kept = config_map(json!({"retention.dev/keep": "true", "retention.dev/ttl": "1h"}));
    let unkept = config_map(json!({"retention.dev/ttl": "1h"}));
    assert_eq!(
        found(Some(&kept), &unkept),
        [(
            "metadata.annotations[retention.dev/keep]".to_owned(),
            "null".to_owned(),
            Reach::Itself
        )]
    );
    assert_eq!(found(Some(&unkept), &kept), []);
    let only_kept = config_map(json!({"retention.dev/keep": "true"}));
    assert_eq!(
        found(Some(&only_kept), &config_map(json!({}))),
        [],
        "a policy's to delete"
    );
}

#[test]
fn a_runs_own_fields_tighten_unless_they_are_its_parents() {
    let run = buildrun(json!({"retention": {"ttlAfterSucceeded": "1h"}}), json!({}));
    let own = (
        "spec.retention.ttlAfterSucceeded".to_owned(),
        "\"1h\"".to_owned(),
        Reach::Itself,
    );
    assert_eq!(found(None, &run), [own]);
    let from_build = Ttls {
        after_succeeded: Some(Duration::from_secs(3600)),
        after_failed: None,
    };
    assert_eq!(found_with_parent(None, &run, from_build), []);
}

#[test]
fn an_embedded_build_is_the_writers_the_status_snapshot_is_not() {
    let embedded = buildrun(
        json!({"build": {"spec": {"retention": {"ttlAfterFailed": "5m"}}}}),
        json!({}),
    );
    assert_eq!(
        found(None, &embedded),
        [(
            "spec.build.spec.retention.ttlAfterFailed".to_owned(),
            "\"5m\"".to_owned(),
            Reach::Itself
        )]
    );
    let snapshot = buildrun(
        json!({}),
        json!({"buildSpec": {"retention": {"ttlAfterFailed": "5m"}}}),
    );
    assert_eq!(found(None, &snapshot), []);
}

#[test]
fn a_parents_run_settings_reach_its_runs() {
    let old = build(json!({"ttlAfterSucceeded": "2h", "succeededLimit": 10}));
    let new = build(json!({"ttlAfterSucceeded": "1h", "succeededLimit": 10,
                           "failedLimit": 3, "atBuildDeletion": true}));
    let paths: Vec<(String, Reach)> = found(Some(&old), &new)
        .into_iter()
        .map(|(path, _, reach)| (path, reach))
        .collect();
    assert_eq!(
        paths,
        [
            ("spec.retention.ttlAfterSucceeded".to_owned(), Reach::Runs),
            ("spec.retention.failedLimit".to_owned(), Reach::Runs),
            ("spec.retention.atBuildDeletion".to_owned(), Reach::Runs),
        ]
    );
    let looser = build(json!({"ttlAfterSucceeded": "3h", "succeededLimit": 20}));
    assert_eq!(found(Some(&old), &looser), []);
}

#[test]
fn invalid_values_are_left_to_the_validator() {
    let invalid = config_map(json!({"retention.dev/ttl": "1 day"}));
    assert_eq!(found(None, &invalid), []);
}

#[test]
fn a_snooze_taken_away_or_brought_forward_tightens_a_longer_one_does_not() {
    let week = config_map(json!({"retention.dev/snoozed-until": "2026-12-08T00:00:00Z"}));
    let day = config_map(json!({"retention.dev/snoozed-until": "2026-12-02T00:00:00Z"}));
    assert_eq!(found(None, &day), [], "a snooze only pushes deadlines");
    assert_eq!(found(Some(&day), &week), []);
    assert_eq!(
        found(Some(&week), &day),
        [annotation("snoozed-until", "2026-12-02T00:00:00Z")]
    );
    assert_eq!(
        found(Some(&week), &config_map(json!({}))),
        [(
            "metadata.annotations[retention.dev/snoozed-until]".to_owned(),
            "null".to_owned(),
            Reach::Itself
        )]
    );
    let notice = config_map(json!({"retention.dev/notify-before": "1h"}));
    assert_eq!(found(None, &notice), [], "a notice deletes nothing");
}
