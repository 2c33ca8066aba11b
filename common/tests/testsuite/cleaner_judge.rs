//! When a Cleaner acts: the TTL first, then the conditions over its targets and `time`; what it
//! waits for otherwise, and the monotonic search for the moment the conditions turn true.

use jiff::{SignedDuration, Timestamp};
use kube_retention_common::cel::Variables;
use kube_retention_common::cleaner::{CleanerSpec, Judge, SEARCH_RESOLUTION, Verdict};
use serde_json::{Value, json};

fn at(text: &str) -> Timestamp {
    text.parse().expect("a timestamp")
}

fn judge(spec: Value) -> Judge {
    let spec: CleanerSpec = serde_json::from_value(spec).expect("a Cleaner spec");
    Judge::new(&spec).expect("a valid spec")
}

fn revisions(phases: &[&str]) -> Value {
    let items: Vec<Value> = phases
        .iter()
        .map(|phase| json!({"metadata": {"name": phase}, "status": {"phase": phase}}))
        .collect();
    json!({ "items": items })
}

fn variables(revisions: &Value) -> Variables {
    Variables::new([("revisions", revisions)]).expect("convertible")
}

fn preview(extra: Value) -> Value {
    let mut spec = json!({
        "ttl": "1h",
        "retry": {"period": "5h"},
        "targets": [{"name": "revisions", "includeWhenEvaluating": true,
                     "reference": {"version": "v1", "kind": "Revision", "matchLabels": {"app": "p42"}}}],
        "conditions": ["!revisions.items.exists(r, r.status.phase == \"Active\")"]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    spec
}

const CREATED: &str = "2026-11-22T10:00:00Z";

#[test]
fn nothing_is_evaluated_before_the_ttl_passes() {
    let judge = judge(preview(json!({})));
    let verdict = judge.judge(
        at(CREATED),
        at("2026-11-22T10:59:59Z"),
        &variables(&revisions(&[])),
    );
    assert_eq!(
        verdict,
        Verdict::TooEarly {
            until: at("2026-11-22T11:00:00Z")
        }
    );
}

#[test]
fn the_group_goes_once_every_condition_holds_after_the_ttl() {
    let judge = judge(preview(json!({})));
    let retired = revisions(&["Retired", "Failed"]);
    let verdict = judge.judge(
        at(CREATED),
        at("2026-11-22T11:00:00Z"),
        &variables(&retired),
    );
    assert_eq!(verdict, Verdict::Clean);
}

#[test]
fn a_false_condition_waits_for_the_period_and_is_named() {
    let judge = judge(preview(json!({"conditions": [
        "revisions.items.size() < 10",
        "!revisions.items.exists(r, r.status.phase == \"Active\")"
    ]})));
    let active = revisions(&["Retired", "Active"]);
    let verdict = judge.judge(at(CREATED), at("2026-11-22T12:00:00Z"), &variables(&active));
    let until = at("2026-11-22T17:00:00Z");
    assert_eq!(
        verdict,
        Verdict::Wait {
            until,
            unmet: 1,
            found: false
        }
    );
}

#[test]
fn a_condition_that_cannot_be_evaluated_is_never_true_and_is_retried_soon() {
    let judge = judge(preview(
        json!({"conditions": ["revisions.items.all(r, r.status.ready)"]}),
    ));
    let verdict = judge.judge(
        at(CREATED),
        at("2026-11-22T12:00:00Z"),
        &variables(&revisions(&["Active"])),
    );
    let Verdict::Failed {
        until,
        condition: 0,
        error,
    } = verdict
    else {
        panic!("expected a failure, got {verdict:?}");
    };
    assert_eq!(until, at("2026-11-22T12:00:30Z"));
    assert!(error.to_string().contains("ready"), "{error}");
}

#[test]
fn a_monotonic_condition_is_scheduled_at_the_moment_it_turns_true() {
    let judge = judge(preview(json!({
        "retry": {"period": "1h", "monotonic": true},
        "conditions": ["time >= timestamp(\"2026-11-22T12:07:13.5Z\")"]
    })));
    let now = at("2026-11-22T12:00:00Z");
    let verdict = judge.judge(at(CREATED), now, &variables(&revisions(&[])));
    let Verdict::Wait {
        until,
        unmet: 0,
        found: true,
    } = verdict
    else {
        panic!("expected a found moment, got {verdict:?}");
    };
    let turns = at("2026-11-22T12:07:13.5Z");
    assert!(
        until >= turns && until.duration_since(turns) <= SEARCH_RESOLUTION,
        "{until}"
    );
    assert_eq!(
        judge.judge(at(CREATED), until, &variables(&revisions(&[]))),
        Verdict::Clean
    );
}

#[test]
fn a_monotonic_search_beyond_the_period_falls_back_to_the_period() {
    let judge = judge(preview(json!({
        "retry": {"period": "1h", "monotonic": true},
        "conditions": ["time >= timestamp(\"2026-11-23T00:00:00Z\")"]
    })));
    let now = at("2026-11-22T12:00:00Z");
    let verdict = judge.judge(at(CREATED), now, &variables(&revisions(&[])));
    let until = now
        .saturating_add(SignedDuration::from_hours(1))
        .expect("in range");
    assert_eq!(
        verdict,
        Verdict::Wait {
            until,
            unmet: 0,
            found: false
        }
    );
}

#[test]
fn without_a_period_the_default_applies_and_without_conditions_the_ttl_alone_decides() {
    let judge = judge(json!({"ttl": "30m"}));
    let verdict = judge.judge(
        at(CREATED),
        at("2026-11-22T10:30:00Z"),
        &Variables::default(),
    );
    assert_eq!(verdict, Verdict::Clean);
    let judge_waiting =
        self::judge(json!({"conditions": ["time > timestamp(\"2030-01-01T00:00:00Z\")"]}));
    let verdict = judge_waiting.judge(at(CREATED), at(CREATED), &Variables::default());
    let until = at("2026-11-22T10:10:00Z");
    assert_eq!(
        verdict,
        Verdict::Wait {
            until,
            unmet: 0,
            found: false
        }
    );
}

#[test]
fn an_invalid_spec_is_not_judged() {
    let spec: CleanerSpec = serde_json::from_value(json!({"ttl": "2 weeks"})).expect("a spec");
    let errors = Judge::new(&spec).expect_err("refused");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "spec.ttl");
}

/// Steps a judgement one condition at a time, as the controller's evaluator does; answers the
/// verdict and how many steps it took.
fn stepped(judge: &Judge, now: Timestamp, variables: &Variables) -> (Verdict, u64) {
    let mut judging = match judge.start(at(CREATED), now) {
        Ok(verdict) => return (verdict, 0),
        Err(judging) => judging,
    };
    loop {
        if let Some(verdict) = judge.step(&mut judging, variables) {
            return (verdict, judging.steps());
        }
    }
}

#[test]
fn a_judgement_goes_one_condition_at_one_time_per_step_and_within_its_most_steps() {
    // Sixteen conditions, the most a Cleaner has; all turn true at one moment within the day.
    let conditions: Vec<String> = (0..16)
        .map(|n| {
            format!(
                "time >= timestamp(\"2026-11-22T17:3{}:00Z\") || {n} < 0",
                n % 10
            )
        })
        .collect();
    let judge = judge(preview(json!({
        "retry": {"period": "24h", "monotonic": true},
        "conditions": conditions,
    })));
    let now = at("2026-11-22T12:00:00Z");
    let (verdict, steps) = stepped(&judge, now, &variables(&revisions(&[])));
    let Verdict::Wait {
        until, found: true, ..
    } = verdict
    else {
        panic!("expected a found moment, got {verdict:?}");
    };
    assert!(until >= at("2026-11-22T17:39:00Z"), "{until}");
    assert!(steps > 16, "the search took steps of its own: {steps}");
    assert!(
        steps <= judge.most_steps(),
        "{steps} steps, more than {}",
        judge.most_steps()
    );
    assert_eq!(
        judge.judge(at(CREATED), now, &variables(&revisions(&[]))),
        verdict,
        "stepped or at once, one verdict"
    );
}

proptest::proptest! {
    /// A monotonic condition found within the search's resolution of the moment it turns true,
    /// wherever in the period that is, in at most `most_steps` steps.
    #[test]
    fn the_monotonic_search_finds_any_moment_within_its_resolution(
        offset_ms in 1i64..(5 * 3600 * 1000),
        conditions in 1usize..4,
    ) {
        let now = at("2026-11-22T12:00:00Z");
        let turns = now.checked_add(SignedDuration::from_millis(offset_ms)).expect("in range");
        let sources: Vec<String> = (0..conditions)
            .map(|n| format!("time >= timestamp(\"{turns}\") && {n} >= 0"))
            .collect();
        let judge = judge(preview(json!({
            "retry": {"period": "5h", "monotonic": true},
            "conditions": sources,
        })));
        let (verdict, steps) = stepped(&judge, now, &variables(&revisions(&[])));
        let Verdict::Wait { until, unmet: 0, found: true } = verdict else {
            return Err(proptest::test_runner::TestCaseError::fail(format!("{verdict:?}")));
        };
        proptest::prop_assert!(until >= turns && until.duration_since(turns) <= SEARCH_RESOLUTION, "{until} for {turns}");
        proptest::prop_assert!(steps <= judge.most_steps());
    }
}
