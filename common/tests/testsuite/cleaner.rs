//! What admission checks in a Cleaner's spec: every error at once, each with its field path.

use kube_retention_common::cleaner::errors;
use serde_json::json;

#[test]
fn the_documented_example_is_valid() {
    let spec = json!({
        "ttl": "360h",
        "retry": {"period": "5h", "monotonic": true},
        "helm": {"release": "preview-42", "delete": true},
        "targets": [
            {"name": "revisions", "includeWhenEvaluating": true, "delete": false,
             "reference": {"apiGroup": "serving.knative.dev", "version": "v1", "kind": "Revision",
                           "matchLabels": {"app": "p42"}}},
            {"name": "settings", "delete": true,
             "reference": {"apiGroup": "", "version": "v1", "kind": "ConfigMap", "name": "preview-42"}}
        ],
        "cloudEventSink": "http://cleanup-sink.example/",
        "conditions": ["!revisions.items.exists(r, r.status.phase == \"Active\")",
                       "time > timestamp(\"2026-01-01T00:00:00Z\")"]
    });
    assert_eq!(errors(&spec), []);
}

#[test]
fn every_error_is_named_at_once() {
    let spec = json!({
        "ttl": "2 weeks",
        "retry": {"period": "-5h"},
        "targets": [
            {"name": "9lives", "reference": {"version": "v1", "kind": "ConfigMap"}},
            {"name": "pods", "includeWhenEvaluating": true,
             "reference": {"version": "v1", "kind": "Pod", "name": "p", "matchLabels": {"a": "b"}}},
            {"name": "pods", "reference": {"version": "v1", "kind": "Pod"}},
            {"name": "time", "reference": {"version": "v1", "kind": "Pod"}}
        ],
        "cloudEventSink": "cleanup-sink.example",
        "conditions": ["pods.items.size() ==", "settings.items.size() == 0", "size(pods.items)"]
    });
    let found = errors(&spec);
    let paths: Vec<&str> = found.iter().map(|error| error.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.ttl",
            "spec.retry.period",
            "spec.targets[0].name",
            "spec.targets[1].reference",
            "spec.targets[2].name",
            "spec.targets[3].name",
            "spec.cloudEventSink",
            "spec.conditions[0]",
            "spec.conditions[1]",
            "spec.conditions[2]",
        ],
        "{found:#?}"
    );
    assert!(found[4].rule.contains("unique"), "{}", found[4]);
    assert!(
        found[8].rule.contains("`settings`") && found[8].rule.contains("`pods`, `time`"),
        "{}",
        found[8]
    );
    assert!(found[9].rule.contains("not true or false"), "{}", found[9]);
}

#[test]
fn a_malformed_spec_is_one_error() {
    let found = errors(&json!({"targets": "all of them"}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path, "spec");
}
