//! A Cleaner held by the blast-radius guard is approved by an update of the Cleaner, whose
//! status names every target it resolved: thousands of them for the large cleans the guard
//! holds. Admission reads a Cleaner without its status, so the approval is judged however many
//! targets it lists (`make chaos`'s every-attack run found one of 10,001 refused as too large to
//! decode).

use crate::support;

use axum::http::StatusCode;
use kube_retention_common::annotations::APPROVED_GENERATION;
use serde_json::{Value, json};
use support::{ours, send};

/// Targets resolved: decoded whole, the object and its old copy would take some 2 MiB, twice
/// `--max-decoded-bytes`.
const RESOLVED: usize = 10_001;

fn cleaner(annotations: Value) -> Value {
    let resolved: Vec<String> = (0..RESOLVED)
        .map(|index| format!("ConfigMap/burst-{index}"))
        .collect();
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
           "metadata": {"name": "burst", "namespace": "team-a", "generation": 1,
                        "annotations": annotations},
           "spec": {"targets": [{"name": "maps", "delete": true,
                                 "reference": {"version": "v1", "kind": "ConfigMap",
                                               "matchLabels": {"burst": "true"}}}]},
           "status": {"resolvedTargets": resolved,
                      "conditions": [{"type": "Ready", "status": "False",
                                      "reason": "AwaitingApproval", "message": "m",
                                      "lastTransitionTime": "2026-12-07T00:00:00Z"}]}})
}

/// The webhook's answer to approving such a Cleaner with `approval`.
async fn approving(approval: &str) -> Value {
    let old = cleaner(json!({}));
    let approved = cleaner(json!({APPROVED_GENERATION: approval}));
    let review = ours("Cleaner", "UPDATE", &approved, Some(&old));
    let (status, body) = send("/validate", &review).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn a_cleaner_awaiting_approval_of_thousands_of_targets_is_approved() {
    let body = approving("1").await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

#[tokio::test]
async fn a_bad_approval_of_such_a_cleaner_is_still_denied_naming_the_field() {
    let body = approving("latest").await;
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert_eq!(
        support::cause_fields(&body),
        [format!("metadata.annotations[{APPROVED_GENERATION}]")]
    );
}
