//! A forged Helm release against a mocked API server (tower-test), the exact requests asserted:
//! each object a release record lists is read first and deleted only when Helm's annotations
//! give it to the release in the Cleaner's namespace, with the uid and resourceVersion of that
//! read; one without them, or another release's, is read and left, and reported; one changed
//! between the read and the DELETE is not deleted and fails the clean (tried again, records
//! kept); a Secret labelled as a record but not named like one is left alone; a release listing
//! a kind a Cleaner does not uninstall is refused before anything is deleted.

use crate::clean_support;

use clean_support::{
    Answers, cleaning, core_resources, group, object, record, refusal, requests, secrets, success,
};
use http::StatusCode;
use serde_json::{Value, json};

const LIST: &str =
    "GET /api/v1/namespaces/team/secrets?&labelSelector=owner%3Dhelm%2Cname%3Dweb&limit=100";
const RECORD: &str = "DELETE /api/v1/namespaces/team/secrets/sh.helm.release.v1.web.v2";
const RETIRE: &str = "DELETE /apis/retention.dev/v1alpha1/namespaces/team/cleaners/tidy";

/// A forged record: a PVC Helm never installed, and a ConfigMap it did.
const FORGED: &str = "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n\
                      ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n";

#[tokio::test]
async fn an_object_without_helms_annotations_is_read_and_not_deleted_and_reported() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(FORGED),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/persistentvolumeclaims/data") => {
            object("PersistentVolumeClaim", "data", None)
        }
        ("GET", "/api/v1/namespaces/team/configmaps/settings") => {
            object("ConfigMap", "settings", Some(("web", "team")))
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
    let cleaned = outcome.unwrap();
    assert_eq!(
        requests(&seen),
        [
            LIST,
            "GET /api/v1",
            "GET /api/v1",
            "GET /api/v1/namespaces/team/configmaps/settings",
            "DELETE /api/v1/namespaces/team/configmaps/settings",
            "GET /api/v1/namespaces/team/persistentvolumeclaims/data",
            RECORD,
            RETIRE,
        ],
        "the PVC is read, never deleted"
    );
    assert_eq!(cleaned.deleted, ["ConfigMap/settings"]);
    assert_eq!(
        cleaned.skipped,
        [
            "PersistentVolumeClaim/data: it has no meta.helm.sh/release-name annotation: \
          Helm did not install it"
        ]
    );
    assert_eq!(cleaned.release.as_deref(), Some("web"));
}

/// A ConfigMap the release owns, carrying 120,000 labels (some 1 MB of text, past the bound of
/// one object decoded): its annotations cannot be read within the bound, so it is left.
#[tokio::test]
async fn an_owned_object_past_the_bound_of_one_object_is_read_and_left_and_reported() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(FORGED),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/persistentvolumeclaims/data") => {
            object("PersistentVolumeClaim", "data", Some(("web", "team")))
        }
        ("GET", "/api/v1/namespaces/team/configmaps/settings") => {
            let (status, mut settings) = object("ConfigMap", "settings", Some(("web", "team")));
            let labels: serde_json::Map<String, Value> = (0..120_000)
                .map(|label| (format!("{label:x}"), json!("")))
                .collect();
            settings["metadata"]["labels"] = Value::Object(labels);
            (status, settings)
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
    let cleaned = outcome.unwrap();
    assert_eq!(
        requests(&seen),
        [
            LIST,
            "GET /api/v1",
            "GET /api/v1",
            "GET /api/v1/namespaces/team/configmaps/settings",
            "GET /api/v1/namespaces/team/persistentvolumeclaims/data",
            "DELETE /api/v1/namespaces/team/persistentvolumeclaims/data",
            RECORD,
            RETIRE,
        ],
        "the ConfigMap is read, never deleted"
    );
    assert_eq!(cleaned.deleted, ["PersistentVolumeClaim/data"]);
    assert_eq!(
        cleaned.skipped,
        ["ConfigMap/settings: it holds more than the controller decodes of one object"]
    );
}

#[tokio::test]
async fn an_owned_object_is_deleted_with_the_uid_and_resource_version_it_was_read_with() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(FORGED),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/persistentvolumeclaims/data") => {
            object("PersistentVolumeClaim", "data", Some(("web", "team")))
        }
        ("GET", "/api/v1/namespaces/team/configmaps/settings") => {
            refusal(StatusCode::NOT_FOUND, "gone already")
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
    let cleaned = outcome.unwrap();
    assert_eq!(cleaned.deleted, ["PersistentVolumeClaim/data"]);
    assert!(cleaned.skipped.is_empty(), "{:?}", cleaned.skipped);
    let deletion = seen
        .iter()
        .find(|(line, _)| line == "DELETE /api/v1/namespaces/team/persistentvolumeclaims/data")
        .unwrap();
    assert_eq!(
        deletion.1["preconditions"],
        json!({"uid": "uid-data", "resourceVersion": "7"})
    );
    assert_eq!(deletion.1["propagationPolicy"], "Background");
    let record = seen.iter().find(|(line, _)| line == RECORD).unwrap();
    assert_eq!(
        record.1["preconditions"],
        json!({"uid": "uid-record", "resourceVersion": "3"}),
        "the record deleted is the one listed"
    );
    assert!(
        !requests(&seen).contains(&"DELETE /api/v1/namespaces/team/configmaps/settings"),
        "an object already gone is not deleted: {:?}",
        requests(&seen)
    );
}

#[tokio::test]
async fn an_object_of_another_release_or_namespace_is_left() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(FORGED),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/persistentvolumeclaims/data") => {
            object("PersistentVolumeClaim", "data", Some(("web", "prod")))
        }
        ("GET", "/api/v1/namespaces/team/configmaps/settings") => {
            object("ConfigMap", "settings", Some(("api", "team")))
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
    let cleaned = outcome.unwrap();
    assert!(cleaned.deleted.is_empty(), "{:?}", cleaned.deleted);
    assert_eq!(
        cleaned.skipped,
        [
            "ConfigMap/settings: its meta.helm.sh/release-name is \"api\", not \"web\": \
             it is another release's",
            "PersistentVolumeClaim/data: its meta.helm.sh/release-namespace is \"prod\", not \
             \"team\": it is another release's",
        ]
    );
    let deleted: Vec<&str> = requests(&seen)
        .into_iter()
        .filter(|line| line.starts_with("DELETE "))
        .collect();
    assert_eq!(deleted, [RECORD, RETIRE], "only the record and the Cleaner");
}

/// The API server refuses a DELETE whose preconditions no longer hold with 409 Conflict.
fn conflict(method: &str, path: &str) -> (StatusCode, Value) {
    match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(FORGED),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/api/v1/namespaces/team/configmaps/settings") => {
            object("ConfigMap", "settings", Some(("web", "team")))
        }
        ("DELETE", "/api/v1/namespaces/team/configmaps/settings") => refusal(
            StatusCode::CONFLICT,
            "Precondition failed: ResourceVersion in precondition: 7, ResourceVersion in object meta: 8",
        ),
        _ => success(),
    }
}

/// As [`conflict`], answering 412 instead, which is taken the same way.
fn precondition_failed(method: &str, path: &str) -> (StatusCode, Value) {
    match (method, path) {
        ("DELETE", "/api/v1/namespaces/team/configmaps/settings") => {
            refusal(StatusCode::PRECONDITION_FAILED, "precondition failed")
        }
        _ => conflict(method, path),
    }
}

#[tokio::test]
async fn an_object_changed_between_its_read_and_its_deletion_fails_the_clean_records_kept() {
    for answers in [conflict as Answers, precondition_failed] {
        let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
        let problem = outcome.unwrap_err();
        assert_eq!(
            problem.reason(),
            "CleanFailed",
            "evaluated again after 30 s"
        );
        let said = problem.to_string();
        assert!(
            said.contains("ConfigMap/settings of Helm release web changed since it was read")
                && said.contains("retried"),
            "{said}"
        );
        assert_eq!(
            requests(&seen),
            [
                LIST,
                "GET /api/v1",
                "GET /api/v1",
                "GET /api/v1/namespaces/team/configmaps/settings",
                "DELETE /api/v1/namespaces/team/configmaps/settings",
            ],
            "nothing after it: the PVC, the record and the Cleaner stay"
        );
    }
}

#[tokio::test]
async fn a_secret_labelled_as_a_record_but_not_named_like_one_is_left_alone() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => {
            let mut password = record("");
            password["metadata"]["name"] = json!("db-password");
            password["metadata"]["labels"]["version"] = json!("9");
            let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {},
                              "items": [record(""), password]});
            (StatusCode::OK, list)
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(0, Some("web")), answers).await;
    let cleaned = outcome.unwrap();
    assert_eq!(requests(&seen), [LIST, RECORD, RETIRE]);
    assert_eq!(
        cleaned.skipped,
        [
            "Secret/db-password: labelled as a record of release web but not named as Helm names \
          them (sh.helm.release.v1.web.vN)"
        ]
    );
}

#[tokio::test]
async fn a_release_listing_a_kind_a_cleaner_does_not_uninstall_is_refused_before_any_deletion() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => secrets(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
             metadata:\n  name: admins\n",
        ),
        ("GET", "/api/v1") => core_resources(),
        ("GET", "/apis/rbac.authorization.k8s.io/v1") => {
            let list = json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "rbac.authorization.k8s.io/v1",
                "resources": [{"name": "rolebindings", "singularName": "", "namespaced": true,
                               "kind": "RoleBinding", "verbs": ["get", "delete"]}]});
            (StatusCode::OK, list)
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    let problem = outcome.unwrap_err();
    assert_eq!(problem.reason(), "HelmReleaseKindNotUninstallable");
    let said = problem.to_string();
    assert!(
        said.contains("RoleBinding/admins") && said.contains("Deployment.apps"),
        "{said}"
    );
    assert!(
        seen.iter().all(|(line, _)| line.starts_with("GET ")),
        "nothing deleted, the targets neither: {:?}",
        requests(&seen)
    );
}

/// A namespace editor's thousands of Secrets labelled as one release's records: listed a page at
/// a time (each within the client's page bound), keeping of each only what deleting it needs,
/// and refused once more than a release has are read, before anything is decoded or deleted.
#[tokio::test]
async fn a_release_of_more_records_than_are_read_is_refused_page_by_page() {
    let answers: Answers = |method, path| match (method, path) {
        ("GET", "/api/v1/namespaces/team/secrets") => {
            let items: Vec<Value> = (0..100)
                .map(|version| {
                    let mut forged = record(FORGED);
                    forged["metadata"]["name"] =
                        json!(format!("sh.helm.release.v1.web.v{version}"));
                    forged["metadata"]["labels"]["version"] = json!(version.to_string());
                    forged
                })
                .collect();
            // Always more: the API server as a namespace of Secrets without end.
            let list = json!({"kind": "SecretList", "apiVersion": "v1",
                              "metadata": {"continue": "more"}, "items": items});
            (StatusCode::OK, list)
        }
        _ => success(),
    };
    let (outcome, seen) = cleaning(group(1, Some("web")), answers).await;
    let problem = outcome.unwrap_err();
    assert_eq!(problem.reason(), "HelmReleaseTooManyRecords");
    assert!(
        problem
            .to_string()
            .contains("release web has more than 1000 Secrets labelled as its records"),
        "{problem}"
    );
    let next = format!("{LIST}&continue=more");
    let mut expected = vec![LIST.to_owned()];
    expected.extend(std::iter::repeat_n(next, 10));
    assert_eq!(requests(&seen), expected, "eleven pages, nothing deleted");
}
