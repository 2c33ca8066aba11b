//! The one candidate builder the controller and `kubectl retention explain` share: which
//! policies may apply in a namespace, in which order, read from their API objects.

use std::collections::BTreeMap;

use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::policies::{PolicyKey, PolicyObject, PolicyScope, Rules, candidates};
use serde_json::{Value, json};

fn retention_policy(namespace: &str, name: &str, spec: Value) -> RetentionPolicy {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec}))
    .unwrap_or_else(|error| panic!("{error}"))
}

fn cluster_policy(name: &str, spec: Value) -> ClusterRetentionPolicy {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "ClusterRetentionPolicy",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap_or_else(|error| panic!("{error}"))
}

fn jobs(ttl: &str) -> Value {
    json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttl": ttl})
}

/// A loaded policy's rules where it is valid.
fn valid((rules, errors): &(Rules, usize)) -> Option<&Rules> {
    (*errors == 0).then_some(rules)
}

/// Read as the controller loads them: every policy, valid or not.
fn load(
    policies: &mut BTreeMap<PolicyKey, (Rules, usize)>,
    policy: &impl PolicyObject,
) -> PolicyKey {
    let (rules, errors) = policy.rules();
    policies.insert(policy.key(), (rules, errors.len()));
    policy.key()
}

#[test]
fn a_namespace_sees_its_own_valid_policies_and_the_cluster_ones_in_key_order() {
    let mut policies = BTreeMap::new();
    load(&mut policies, &retention_policy("team-a", "b", jobs("1h")));
    load(&mut policies, &retention_policy("team-a", "a", jobs("2h")));
    load(&mut policies, &retention_policy("team-b", "a", jobs("1h")));
    load(
        &mut policies,
        &retention_policy("team-a", "broken", jobs("soon")),
    );
    load(&mut policies, &cluster_policy("z", jobs("3h")));
    let (keys, judged) = candidates(&policies, "team-a", valid, |_| None);
    let names: Vec<String> = keys.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "ClusterRetentionPolicy z",
            "RetentionPolicy team-a/a",
            "RetentionPolicy team-a/b"
        ]
    );
    let scopes: Vec<bool> = judged
        .iter()
        .map(|candidate| candidate.namespaced)
        .collect();
    assert_eq!(scopes, [false, true, true]);
    let (keys, _) = candidates(&policies, "team-c", valid, |_| None);
    assert_eq!(keys.len(), 1, "only the cluster policy: {keys:?}");
}

#[test]
fn policies_are_named_and_read_from_their_api_objects() {
    let namespaced = retention_policy("team-a", "jobs", jobs("1h"));
    assert_eq!(namespaced.key().to_string(), "RetentionPolicy team-a/jobs");
    assert_eq!(namespaced.key().scope(), PolicyScope::Namespaced);
    let mut spec = jobs("1h");
    spec["namespaceSelector"] = json!({"matchLabels": {"tier": "ci"}});
    let cluster = cluster_policy("jobs", spec);
    assert_eq!(cluster.key().to_string(), "ClusterRetentionPolicy jobs");
    assert_eq!(cluster.key().scope(), PolicyScope::Cluster);
    let (rules, errors) = cluster.rules();
    assert!(errors.is_empty(), "{errors:?}");
    let ci = BTreeMap::from([("tier".to_owned(), "ci".to_owned())]);
    assert!(rules.namespace_selector.matches(&ci));
    assert!(!rules.namespace_selector.matches(&BTreeMap::new()));
    let mut spec = jobs("1h");
    spec["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "tier", "operator": "Sometimes"}]});
    let (_, errors) = cluster_policy("jobs", spec).rules();
    let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    assert!(
        paths
            .iter()
            .all(|path| path.starts_with("spec.namespaceSelector"))
            && !paths.is_empty(),
        "{errors:?}"
    );
}
