//! RetentionPolicy specs: what a valid one means, and every error of an invalid one named by
//! field, value and rule.

use std::time::Duration;

use kube_retention_common::api::PolicyRules;
use kube_retention_common::cel::{Expect, Expression};
use kube_retention_common::policies::Rules;
use serde_json::{Value, json};

fn spec(value: Value) -> PolicyRules {
    serde_json::from_value(value).unwrap()
}

fn errors(value: Value) -> Vec<String> {
    Rules::read(&spec(value), None)
        .1
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn reads_a_tekton_policy() {
    let (rules, errors) = Rules::read(
        &spec(json!({
            "resources": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun"}],
            "selector": {"matchLabels": {"team": "a"}},
            "match": "object.metadata.name.startsWith('ci-')",
            "ttlAfterSucceeded": "1h", "ttlAfterFailed": "24h",
            "succeededLimit": 5, "failedLimit": 3, "groupBy": "tekton.dev/pipeline",
            "dryRun": true,
        })),
        Some(&json!({"matchLabels": {"team": "a"}})),
    );
    assert_eq!(errors, []);
    assert!(rules.governs("tekton.dev/v1beta1", "PipelineRun"));
    assert!(!rules.governs("tekton.dev/v1", "TaskRun"));
    assert_eq!(rules.ttls.after_succeeded, Some(Duration::from_secs(3600)));
    assert_eq!(
        (rules.succeeded_limit, rules.failed_limit),
        (Some(5), Some(3))
    );
    assert_eq!(rules.group_by.as_deref(), Some("tekton.dev/pipeline"));
    assert!(rules.dry_run);
    let matcher = rules.matches.unwrap();
    assert_eq!(
        matcher.condition(&json!({"metadata": {"name": "ci-1"}})),
        Ok(true)
    );
    assert_eq!(
        matcher.condition(&json!({"metadata": {"name": "nightly"}})),
        Ok(false)
    );
}

#[test]
fn reports_every_error_at_once_naming_the_field() {
    let found = errors(json!({
        "resources": [{"apiVersion": "a/b/c", "kind": "X"}, {"apiVersion": "v1", "kind": ""}],
        "ttl": "1d", "succeededLimit": 101, "failedLimit": 0,
        "match": "object.metadata.name ==",
        "finished": {"succeeded": "phase == 'Done'", "failed": "'Broken'",
                     "at": "object.status.done == true"},
        "groupBy": "Not A Key",
        "selector": {"matchExpressions": [{"key": "x", "operator": "Near"}]},
    }));
    let paths: Vec<&str> = found
        .iter()
        .map(|error| error.split(':').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "spec.resources[0].apiVersion",
            "spec.resources[1].kind",
            "spec.selector.matchExpressions[0].operator",
            "spec.match",
            "spec.ttl",
            "spec.succeededLimit",
            "spec.failedLimit",
            "spec.finished.succeeded",
            "spec.finished.failed",
            "spec.finished.at",
            "spec.groupBy",
        ],
        "{found:#?}"
    );
    assert!(found[3].contains("is not valid CEL"), "{}", found[3]);
    assert!(
        found[7].contains("uses `phase`: the only variable is `object`"),
        "{}",
        found[7]
    );
    assert!(
        found[8].contains("gives a value, not true or false"),
        "{}",
        found[8]
    );
    assert!(
        found[9].contains("gives true or false, not a time"),
        "{}",
        found[9]
    );
    assert_eq!(
        found[5],
        "spec.succeededLimit: 101 is above the limit of 100: use a whole number from 1 to 100, e.g. 5"
    );
}

#[test]
fn a_policy_that_deletes_nothing_or_names_no_kind_is_refused() {
    assert_eq!(
        errors(json!({"resources": []})),
        [
            "spec.resources: [] names no kind: add one, e.g. {apiVersion: tekton.dev/v1, kind: PipelineRun}",
            "spec: \"{}\" sets no ttl, ttlAfterSucceeded, ttlAfterFailed, succeededLimit or failedLimit: it would delete nothing",
        ]
    );
}

#[test]
fn cel_names_functions_it_lacks_and_evaluates_kubernetes_extensions() {
    let unknown = Expression::compile("object.x.frobnicate()", Expect::Condition).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "calls `frobnicate`, which CEL does not have"
    );
    let lower = Expression::compile(
        "object.status.phase.lowerAscii() == 'done'",
        Expect::Condition,
    )
    .unwrap();
    assert_eq!(
        lower.condition(&json!({"status": {"phase": "DONE"}})),
        Ok(true)
    );
    let missing = lower.condition(&json!({"status": {}})).unwrap_err();
    assert!(missing.to_string().contains("phase"), "{missing}");
}

#[test]
fn cel_times_come_from_timestamps_or_rfc3339_strings() {
    let at = Expression::compile("timestamp(object.status.finishedAt)", Expect::Time).unwrap();
    let object = json!({"status": {"finishedAt": "2026-06-01T12:00:00.5Z"}});
    assert_eq!(
        at.time(&object),
        Ok("2026-06-01T12:00:00.5Z".parse().unwrap())
    );
    let text = Expression::compile("object.status.finishedAt", Expect::Time).unwrap();
    assert_eq!(
        text.time(&object),
        Ok("2026-06-01T12:00:00.5Z".parse().unwrap())
    );
    assert!(text.time(&json!({"status": {"finishedAt": 5}})).is_err());
}

#[test]
fn hold_while_is_a_condition_checked_like_match() {
    let (rules, read_errors) = Rules::read(
        &spec(json!({
            "resources": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun"}],
            "ttl": "24h",
            "holdWhile": "!has(object.metadata.annotations) \
                          || !('results.tekton.dev/record' in object.metadata.annotations)",
        })),
        None,
    );
    assert_eq!(read_errors, []);
    assert!(rules.hold_while.is_some() && rules.has_expressions());
    let said = errors(json!({
        "resources": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun"}],
        "ttl": "24h", "holdWhile": "object.metadata.name =="}));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("spec.holdWhile: \"object.metadata.name ==\" is not valid CEL"),
        "{said:?}"
    );
}
