//! A Cleaner's clean against a mocked API server (tower-test), the exact requests asserted: its
//! objects deleted with uid preconditions and the propagation policy, an object already gone
//! or replaced by a namesake skipped, a failure stopping the clean before anything else is
//! deleted; a Helm release read before anything is deleted, its objects (found through
//! discovery) and records deleted after the targets, a cluster-scoped object refusing the
//! release whole; and the Cleaner deleting itself, exactly itself.

use crate::clean_support;

use clean_support::{
    Answers, cleaning, cleaning_guarded, core_resources, group, object, refusal, requests, secrets,
    success,
};
use http::StatusCode;
use serde_json::json;

#[tokio::test]
async fn targets_go_with_uid_preconditions_then_the_cleaner_itself() {
    let (outcome, seen) = cleaning(group(2, None), |_, _| success()).await;
    assert_eq!(
        outcome.unwrap().deleted,
        ["ConfigMap/cm-0", "ConfigMap/cm-1"]
    );
    assert_eq!(
        requests(&seen),
        [
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "DELETE /api/v1/namespaces/team/configmaps/cm-1",
            "DELETE /apis/retention.dev/v1alpha1/namespaces/team/cleaners/tidy",
        ]
    );
    assert_eq!(seen[0].1["preconditions"], json!({"uid": "uid-0"}));
    assert_eq!(seen[0].1["propagationPolicy"], "Foreground");
    assert_eq!(seen[2].1["preconditions"], json!({"uid": "cleaner-uid"}));
}

#[tokio::test]
async fn a_target_already_gone_or_replaced_is_skipped_not_a_failure() {
    let answers: Answers = |_, path| match path {
        p if p.ends_with("/cm-0") => refusal(StatusCode::NOT_FOUND, "gone"),
        p if p.ends_with("/cm-1") => refusal(StatusCode::CONFLICT, "uid precondition failed"),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(3, None), answers).await;
    assert_eq!(outcome.unwrap().deleted, ["ConfigMap/cm-2"]);
    assert_eq!(seen.len(), 4, "{:?}", requests(&seen));
}

#[tokio::test]
async fn a_failed_deletion_stops_the_clean_and_the_cleaner_stays() {
    let answers: Answers = |_, path| match path {
        p if p.ends_with("/cm-1") => refusal(StatusCode::FORBIDDEN, "no delete for you"),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(3, None), answers).await;
    let problem = outcome.unwrap_err().to_string();
    assert!(problem.contains("no delete for you"), "{problem}");
    assert_eq!(
        requests(&seen),
        [
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "DELETE /api/v1/namespaces/team/configmaps/cm-1",
        ],
        "nothing after the failure, the Cleaner least of all"
    );
}

const MANIFEST: &str = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n";

#[tokio::test]
async fn a_release_is_read_first_and_uninstalled_after_the_targets() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(MANIFEST),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/services/web") => {
            object("Service", "web", Some(("web", "team")))
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    assert_eq!(outcome.unwrap().deleted, ["ConfigMap/cm-0", "Service/web"]);
    assert_eq!(
        requests(&seen),
        [
            "GET /api/v1/namespaces/team/secrets?&labelSelector=owner%3Dhelm%2Cname%3Dweb&limit=100",
            "GET /api/v1",
            "DELETE /api/v1/namespaces/team/configmaps/cm-0",
            "GET /api/v1/namespaces/team/services/web",
            "DELETE /api/v1/namespaces/team/services/web",
            "DELETE /api/v1/namespaces/team/secrets/sh.helm.release.v1.web.v2",
            "DELETE /apis/retention.dev/v1alpha1/namespaces/team/cleaners/tidy",
        ]
    );
}

#[tokio::test]
async fn a_release_with_a_cluster_scoped_object_is_refused_before_anything_is_deleted() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n\
             ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: elsewhere\n",
        ),
        ("GET", "/api/v1") => core_resources(),
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    let problem = outcome.unwrap_err().to_string();
    assert!(
        problem.contains("outside namespace team") && problem.contains("elsewhere"),
        "{problem}"
    );
    assert!(
        seen.iter().all(|(line, _)| line.starts_with("GET ")),
        "nothing deleted: {:?}",
        requests(&seen)
    );
}

/// The Cleaners' blast-radius guard: a clean deleting more at once than the threshold is held
/// whole, nothing sent, until its generation is approved; the release's objects and records count.
#[tokio::test]
async fn a_clean_past_the_guards_threshold_deletes_nothing_until_approved() {
    let (outcome, seen) = cleaning_guarded(group(3, None), |_, _| success(), 2).await;
    let problem = outcome.unwrap_err();
    assert_eq!(problem.reason(), "AwaitingApproval");
    let message = problem.to_string();
    assert!(
        message.starts_with(
            "would delete 3 objects at once, more than the blast-radius guard allows (2"
        ) && message.contains("kubectl retention approve cleaner tidy -n team"),
        "{message}"
    );
    assert!(seen.is_empty(), "nothing sent: {:?}", requests(&seen));

    let (outcome, seen) = cleaning_guarded(group(2, None), |_, _| success(), 2).await;
    assert_eq!(
        outcome.unwrap().deleted.len(),
        2,
        "within it: the clean goes"
    );
    assert_eq!(seen.len(), 3, "{:?}", requests(&seen));

    let mut approved = group(3, None);
    approved.approved = true;
    let (outcome, _) = cleaning_guarded(approved, |_, _| success(), 2).await;
    assert_eq!(
        outcome.unwrap().deleted.len(),
        3,
        "approved: the clean goes"
    );
}

#[tokio::test]
async fn a_releases_objects_and_records_count_toward_the_guard() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(MANIFEST),
        ("GET", "/api/v1") => core_resources(),
        _ => success(),
    };
    // One target, the release's Service and its one record: three.
    let (outcome, seen) = cleaning_guarded(group(1, Some("web")), answers, 2).await;
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.starts_with("would delete 3 objects at once"),
        "{message}"
    );
    assert!(
        seen.iter().all(|(line, _)| line.starts_with("GET ")),
        "read, nothing deleted: {:?}",
        requests(&seen)
    );
}
