//! The checked-in writer policy (deploy/ and the chart's copy of its spec) is exactly what the
//! model generates.

use std::path::Path;

use kube_retention_controller::admission_policy;

#[test]
fn checked_in_admission_policy_matches_the_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (path, generated) in [
        (
            admission_policy::DEPLOY_PATH,
            admission_policy::render_deploy(),
        ),
        (
            admission_policy::CHART_PATH,
            admission_policy::render_chart_spec(),
        ),
    ] {
        let generated = generated.unwrap_or_else(|error| panic!("{error}"));
        let checked_in = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{path} is stale: run `make admission-policy`"
        );
    }
}

/// The annotated objects' hook (deploy/ and the chart) sends the webhook what the policy judges:
/// their matchConditions are the policy's, spelled alike but for line breaks.
#[test]
fn the_annotated_hook_matches_what_the_policy_matches() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let expected: Vec<(String, String)> = kube_retention_common::writer_policy::match_conditions()
        .into_iter()
        .map(|condition| (condition.name, words(&condition.expression)))
        .collect();
    let text = std::fs::read_to_string(root.join("deploy/admission/validating.yaml")).unwrap();
    let configuration: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let hook = configuration["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|hook| hook["name"] == "annotated.validate.retention.dev")
        .unwrap();
    let found: Vec<(String, String)> = hook["matchConditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|condition| {
            (
                condition["name"].as_str().unwrap().to_owned(),
                words(condition["expression"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(found, expected, "deploy/admission/validating.yaml");
    let chart = std::fs::read_to_string(
        root.join("charts/kube-retention/templates/admission-validating.yaml"),
    )
    .unwrap();
    let chart = words(&chart.replace(">-", " "));
    for (name, expression) in &expected {
        let escaped = words(&expression.replace('"', "\\\""));
        assert!(
            chart.contains(&format!("name: {name}"))
                && (chart.contains(expression) || chart.contains(&escaped)),
            "the chart's annotated hook: {name}: {expression}"
        );
    }
}
