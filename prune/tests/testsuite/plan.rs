//! The prune plan without a cluster: strategies per kind and namespace, newest kept; running,
//! kept and vetoed objects stay; finish rules overridden and extended.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::progress::{Finished, Outcome, Progress};
use kube_retention_prune::{Decision, FinishRules, Settings, Strategy, plan};
use serde_json::{Value, json};

const NOW: &str = "2026-11-22T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("a time")
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("an object")
}

/// A Job in `namespace` that completed on day `day` of November 2026 (or runs, for `None`).
fn job(namespace: &str, name: &str, day: Option<u8>, extra: Value) -> DynamicObject {
    let status = match day {
        Some(day) => json!({"completionTime": format!("2026-11-{day:02}T00:00:00Z"),
                            "conditions": [{"type": "Complete", "status": "True"}]}),
        None => json!({"active": 1}),
    };
    let mut value = json!({"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": namespace, "uid": format!("{namespace}-{name}")},
                           "status": status});
    if let (Some(metadata), Some(extra)) = (value["metadata"].as_object_mut(), extra.as_object()) {
        metadata.extend(extra.clone());
    }
    object(value)
}

fn decisions(objects: &[DynamicObject], settings: &Settings) -> Vec<(String, Decision)> {
    plan(objects, settings, now())
        .objects
        .into_iter()
        .map(|planned| {
            (
                format!("{}/{}", planned.namespace, planned.name),
                planned.decision,
            )
        })
        .collect()
}

fn settings(strategies: Vec<Strategy>) -> Settings {
    Settings {
        strategies,
        ..Settings::default()
    }
}

#[test]
fn newest_finished_keeps_the_newest_per_namespace_and_never_a_running_or_kept_job() {
    let jobs = [
        job("ci", "a", Some(18), json!({})),
        job("ci", "b", Some(19), json!({})),
        job("ci", "c", Some(20), json!({})),
        job("ci", "d", None, json!({})),
        job(
            "ci",
            "e",
            Some(1),
            json!({"annotations": {"retention.dev/keep": "true"}}),
        ),
        job("other", "a", Some(1), json!({})),
    ];
    let decided = decisions(&jobs, &settings(vec![Strategy::NewestFinished(1)]));
    let pruned = Decision::NewestFinished { limit: 1 };
    assert_eq!(
        decided,
        [
            ("ci/a".to_owned(), pruned.clone()),
            ("ci/b".to_owned(), pruned),
            ("ci/d".to_owned(), Decision::Running),
            ("ci/e".to_owned(), Decision::KeepAnnotation),
            ("ci/c".to_owned(), Decision::Kept),
            ("other/a".to_owned(), Decision::Kept),
        ]
    );
}

#[test]
fn max_age_and_newest_finished_together_prune_what_either_chooses() {
    let jobs = [
        job("ci", "old", Some(1), json!({})),
        job("ci", "newer", Some(21), json!({})),
        job("ci", "newest", Some(22), json!({})),
    ];
    let strategies = vec![
        Strategy::MaxAge(Duration::from_secs(7 * 86_400)),
        Strategy::NewestFinished(5),
    ];
    let decided = decisions(&jobs, &settings(strategies));
    assert_eq!(
        decided[0],
        (
            "ci/old".to_owned(),
            Decision::MaxAge {
                limit: "168h".into()
            }
        )
    );
    assert!(
        decided[1..]
            .iter()
            .all(|(_, decision)| *decision == Decision::Kept)
    );
}

#[test]
fn a_custom_strategy_chooses_and_a_hook_vetoes() {
    let jobs = [
        job("ci", "a", Some(1), json!({"labels": {"audit": "hold"}})),
        job("ci", "b", Some(2), json!({})),
        job("ci", "c", Some(3), json!({})),
    ];
    let every_other = Strategy::Custom {
        name: "every-other".into(),
        choose: Arc::new(|candidates, _| {
            (0..candidates.len())
                .filter(|index| index % 2 == 0)
                .collect()
        }),
    };
    let mut settings = settings(vec![every_other]);
    settings.hook = Some(Arc::new(|object: &DynamicObject| {
        match object
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("audit"))
        {
            Some(_) => Err("held for audit".into()),
            None => Ok(()),
        }
    }));
    let custom = Decision::Custom {
        strategy: "every-other".into(),
    };
    assert_eq!(
        decisions(&jobs, &settings),
        [
            ("ci/c".to_owned(), custom),
            (
                "ci/a".to_owned(),
                Decision::Vetoed {
                    reason: "held for audit".into()
                }
            ),
            ("ci/b".to_owned(), Decision::Kept),
        ]
    );
}

#[test]
fn finish_rules_are_kube_retentions_and_can_be_overridden_or_extended() {
    let build_run = |name: &str, status: &str| {
        object(
            json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
                      "metadata": {"name": name, "namespace": "ci", "uid": name},
                      "status": {"conditions": [{"type": "Succeeded", "status": status,
                                                 "lastTransitionTime": "2026-11-01T00:00:00Z"}]}}),
        )
    };
    let widget = object(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                               "metadata": {"name": "w", "namespace": "ci", "uid": "w"},
                               "status": {"done": true}}));
    let objects = [
        build_run("ok", "True"),
        build_run("going", "Unknown"),
        widget,
    ];
    let all = settings(vec![Strategy::NewestFinished(0)]);
    let decided = decisions(&objects, &all);
    assert!(decided.contains(&("ci/ok".to_owned(), Decision::NewestFinished { limit: 0 })));
    assert!(decided.contains(&("ci/going".to_owned(), Decision::Running)));
    assert!(
        decided.contains(&("ci/w".to_owned(), Decision::NotARun)),
        "{decided:?}"
    );
    let extended =
        Settings {
            rules: FinishRules::default().with("example.com", "Widget", |object| {
                match object["status"]["done"].as_bool() {
                    Some(true) => Progress::Finished(Finished {
                        outcome: Outcome::Succeeded,
                        at: None,
                    }),
                    _ => Progress::Running,
                }
            }),
            ..all
        };
    let decided = decisions(&objects, &extended);
    assert!(
        decided.contains(&("ci/w".to_owned(), Decision::NewestFinished { limit: 0 })),
        "{decided:?}"
    );
}
