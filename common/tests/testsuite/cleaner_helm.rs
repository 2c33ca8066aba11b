//! What a Cleaner may delete of a Helm release: only objects Helm's annotations give to that
//! release in that namespace, and only of the kinds admission checked the writer for.

use std::collections::BTreeMap;

use kube_retention_common::cleaner::helm::{
    NotOwned, RELEASE_NAME, RELEASE_NAMESPACE, ownership, uninstallable,
};

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

#[test]
fn an_object_helm_installed_for_the_release_in_the_namespace_is_owned() {
    let helm = annotations(&[
        (RELEASE_NAME, "web"),
        (RELEASE_NAMESPACE, "team"),
        ("unrelated", "x"),
    ]);
    assert_eq!(ownership(Some(&helm), "web", "team"), Ok(()));
}

#[test]
fn an_object_without_helms_annotations_is_not_owned() {
    assert_eq!(
        ownership(None, "web", "team"),
        Err(NotOwned::Unannotated {
            annotation: RELEASE_NAME
        })
    );
    let half = annotations(&[(RELEASE_NAME, "web")]);
    let refused = ownership(Some(&half), "web", "team").unwrap_err();
    assert_eq!(
        refused.to_string(),
        "it has no meta.helm.sh/release-namespace annotation: Helm did not install it"
    );
}

#[test]
fn an_object_of_another_release_or_namespace_is_not_owned() {
    let other = annotations(&[(RELEASE_NAME, "api"), (RELEASE_NAMESPACE, "team")]);
    let refused = ownership(Some(&other), "web", "team").unwrap_err();
    assert_eq!(
        refused.to_string(),
        "its meta.helm.sh/release-name is \"api\", not \"web\": it is another release's"
    );
    let elsewhere = annotations(&[(RELEASE_NAME, "web"), (RELEASE_NAMESPACE, "prod")]);
    assert_eq!(
        ownership(Some(&elsewhere), "web", "team"),
        Err(NotOwned::Elsewhere {
            annotation: RELEASE_NAMESPACE,
            found: "prod".to_owned(),
            expected: "team".to_owned(),
        })
    );
}

#[test]
fn only_the_listed_kinds_are_uninstallable_by_group_and_kind() {
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "PersistentVolumeClaim"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJob"),
        ("networking.k8s.io/v1", "Ingress"),
    ] {
        assert!(uninstallable(api_version, kind), "{api_version} {kind}");
    }
    for (api_version, kind) in [
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("v1", "ResourceQuota"),
        ("v1", "Namespace"),
        ("v1", "Deployment"),
        ("example.com/v1", "ConfigMap"),
        ("retention.dev/v1alpha1", "Cleaner"),
    ] {
        assert!(!uninstallable(api_version, kind), "{api_version} {kind}");
    }
}
