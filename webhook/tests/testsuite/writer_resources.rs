//! The writer check through the router, for RetentionPolicies and Cleaners: their writer must
//! be allowed to delete (and list) what they name, where they apply.

use crate::support;

use std::sync::Arc;

use kube_retention_common::cleaner::helm::UNINSTALLABLE_KINDS;
use serde_json::{Value, json};
use support::{Rbac, cause_fields, context, ours, send_to};

fn policy(kind: &str, namespace: Option<&str>) -> Value {
    let mut policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": kind,
                            "metadata": {"name": "p"},
                            "spec": {"resources": [{"apiVersion": "v1", "kind": "Secret"}], "ttl": "1h"}});
    if let Some(namespace) = namespace {
        policy["metadata"]["namespace"] = json!(namespace);
    }
    policy
}

#[tokio::test]
async fn a_policy_needs_delete_and_list_on_each_kind_where_it_applies() {
    let rbac = Arc::new(Rbac::default());
    let namespaced = policy("RetentionPolicy", Some("team-a"));
    let request = ours("RetentionPolicy", "CREATE", &namespaced, None);
    let (_, body) = send_to(context(rbac), "/validate", &request).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    for lacking in [
        "you may not delete secrets in namespace team-a",
        "you may not list secrets in namespace team-a",
    ] {
        assert!(message.contains(lacking), "{message}");
    }
    let namespaced_only = Arc::new(Rbac {
        allowed: vec![
            ("bob", "delete", "secrets", Some("team-a")),
            ("bob", "list", "secrets", Some("team-a")),
        ],
        ..Rbac::default()
    });
    let (_, body) = send_to(context(namespaced_only.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    let cluster = policy("ClusterRetentionPolicy", None);
    let request = ours("ClusterRetentionPolicy", "CREATE", &cluster, None);
    let (_, body) = send_to(context(namespaced_only), "/validate", &request).await;
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("you may not delete secrets cluster-wide"),
        "{message}"
    );

    // A change outside the spec (a label) needs nothing.
    let rbac = Arc::new(Rbac::default());
    let mut labelled = namespaced.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    let request = ours("RetentionPolicy", "UPDATE", &labelled, Some(&namespaced));
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(rbac.asked.lock().unwrap().is_empty());
}

/// Approving a policy's deletions past its blast-radius guard lends the controller's power as
/// much as writing the policy: the same permissions, asked again only when the approval changes.
#[tokio::test]
async fn approving_a_policys_deletions_needs_what_writing_it_needs() {
    let written = policy("RetentionPolicy", Some("team-a"));
    let mut approved = written.clone();
    approved["metadata"]["annotations"] = json!({"retention.dev/approved-generation": "2"});
    let request = ours("RetentionPolicy", "UPDATE", &approved, Some(&written));
    let (_, body) = send_to(context(Arc::new(Rbac::default())), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], false, "{body}");
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("you may not delete secrets in namespace team-a"),
        "{message}"
    );
    assert!(
        message.contains("approve a retention policy's deletions"),
        "{message}"
    );

    let allowed = Arc::new(Rbac {
        allowed: vec![
            ("bob", "delete", "secrets", Some("team-a")),
            ("bob", "list", "secrets", Some("team-a")),
        ],
        ..Rbac::default()
    });
    let (_, body) = send_to(context(allowed), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");

    // The same approval written again (a label added beside it) asks nothing.
    let rbac = Arc::new(Rbac::default());
    let mut labelled = approved.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    let request = ours("RetentionPolicy", "UPDATE", &labelled, Some(&approved));
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(rbac.asked.lock().unwrap().is_empty());
}

fn cleaner(spec: Value) -> Value {
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
           "metadata": {"name": "preview-42", "namespace": "team-a"}, "spec": spec})
}

#[tokio::test]
async fn a_cleaner_needs_delete_on_what_it_deletes_and_list_on_what_it_reads() {
    let spec = json!({"ttl": "1h", "helm": {"release": "preview-42", "delete": true},
        "targets": [{"name": "settings", "delete": true,
                     "reference": {"version": "v1", "kind": "ConfigMap", "name": "preview-42"}},
                    {"name": "pods", "includeWhenEvaluating": true,
                     "reference": {"version": "v1", "kind": "Pod", "matchLabels": {"app": "p42"}}}],
        "conditions": ["pods.items.size() == 0"]});
    let object = cleaner(spec);
    let request = ours("Cleaner", "CREATE", &object, None);
    let (_, body) = send_to(context(Arc::new(Rbac::default())), "/validate", &request).await;
    let causes = body["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .clone();
    let found: Vec<(&str, &str)> = causes
        .iter()
        .map(|cause| {
            (
                cause["field"].as_str().unwrap(),
                cause["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "spec.targets[0]",
                "\"settings\" you may not delete configmaps in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.targets[0]",
                "\"settings\" you may not list configmaps in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.targets[1]",
                "\"pods\" you may not list pods in namespace team-a, so you may not make a Cleaner of them"
            ),
            (
                "spec.helm",
                "\"preview-42\" you may not delete secrets, configmaps, services, serviceaccounts, \
                 persistentvolumeclaims, pods, deployments.apps, statefulsets.apps, \
                 daemonsets.apps, replicasets.apps, jobs.batch, cronjobs.batch and \
                 ingresses.networking.k8s.io in namespace team-a, so you may not have a Cleaner \
                 uninstall a Helm release: its records are Secrets, and whoever may write them \
                 can make them list objects of every kind a Cleaner uninstalls"
            ),
        ]
    );
    let mut allowed = helm_deleter(&[]);
    allowed.extend([
        ("bob", "list", "configmaps", Some("team-a")),
        ("bob", "list", "pods", Some("team-a")),
    ]);
    let allowed = Arc::new(Rbac {
        allowed,
        ..Rbac::default()
    });
    let (_, body) = send_to(context(allowed), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

/// What bob may do in team-a: delete every kind a Cleaner uninstalls from a Helm release, but
/// those `but`.
type Grant = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
);
fn helm_deleter(but: &[&str]) -> Vec<Grant> {
    UNINSTALLABLE_KINDS
        .iter()
        .filter(|known| !but.contains(&known.plural))
        .map(|known| ("bob", "delete", known.plural, Some("team-a")))
        .collect()
}

/// A forged release record can list a PVC (or any kind a Cleaner uninstalls), which the
/// controller would delete: deleting Secrets is not enough to have a release uninstalled.
#[tokio::test]
async fn uninstalling_a_helm_release_needs_delete_on_every_kind_a_cleaner_uninstalls() {
    let object = cleaner(json!({"ttl": "1h", "helm": {"release": "preview-42", "delete": true}}));
    let request = ours("Cleaner", "CREATE", &object, None);
    let secrets_only = Arc::new(Rbac {
        allowed: helm_deleter(&["persistentvolumeclaims", "jobs"]),
        ..Rbac::default()
    });
    let (_, body) = send_to(context(secrets_only.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert_eq!(
        cause_fields(&body),
        ["spec.helm"],
        "one refusal naming both"
    );
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "spec.helm: \"preview-42\" you may not delete persistentvolumeclaims and jobs.batch \
             in namespace team-a, so you may not have a Cleaner uninstall a Helm release"
        ),
        "{message}"
    );
    let asked: Vec<String> = secrets_only
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|(_, question)| question.resource.clone())
        .collect();
    let every: Vec<&str> = UNINSTALLABLE_KINDS
        .iter()
        .map(|known| known.plural)
        .collect();
    assert_eq!(asked, every, "one question a kind, nothing else");

    let all = Arc::new(Rbac {
        allowed: helm_deleter(&[]),
        ..Rbac::default()
    });
    let (_, body) = send_to(context(all), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");

    // A release named but not uninstalled lends nothing: nobody is asked.
    let kept = cleaner(json!({"ttl": "1h", "helm": {"release": "preview-42", "delete": false}}));
    let rbac = Arc::new(Rbac::default());
    let request = ours("Cleaner", "CREATE", &kept, None);
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(rbac.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_invalid_cleaner_is_denied_naming_every_field_before_anyone_is_asked() {
    let rbac = Arc::new(Rbac::default());
    let object = cleaner(json!({"ttl": "1d", "targets": [
        {"name": "a-b", "reference": {"version": "v1", "kind": "Pod"}}],
        "conditions": ["a.items.size() > 0"]}));
    let request = ours("Cleaner", "CREATE", &object, None);
    let (_, body) = send_to(context(rbac.clone()), "/validate", &request).await;
    assert_eq!(body["response"]["status"]["code"], 422);
    let fields = cause_fields(&body);
    assert_eq!(
        fields,
        ["spec.ttl", "spec.targets[0].name", "spec.conditions[0]"]
    );
    assert!(rbac.asked.lock().unwrap().is_empty());
}
