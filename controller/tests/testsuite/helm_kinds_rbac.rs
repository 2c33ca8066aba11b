//! The kinds a Cleaner uninstalls from a Helm release (`common::cleaner::helm`) are read from
//! deploy/'s RBAC, kept in step by this test: each is one the default install lets the
//! controller read (get) and delete — Secrets where `deploy/optional/cleaner-helm.yaml` is
//! applied — and every kind deploy/ lets it delete is either among them or left out for a reason
//! said here, so a kind granted later is a decision, not an accident.

use std::collections::BTreeSet;

use kube_retention_common::cleaner::helm::UNINSTALLABLE_KINDS;
use serde::Deserialize;
use serde_json::Value;

/// Kinds deploy/ lets the controller delete that a Cleaner never uninstalls, and why.
const LEFT_OUT: [(&str, &str, &str); 3] = [
    (
        "shipwright.io",
        "buildruns",
        "runs, made by CI, not installed by charts",
    ),
    (
        "build.openshift.io",
        "builds",
        "runs, made by CI, not installed by charts",
    ),
    (
        "retention.dev",
        "cleaners",
        "the controller deletes a Cleaner only as itself, once its group is cleaned",
    ),
];

/// (group, resource) the roles in `yaml` grant `verb` on: every ClusterRole the controller's
/// aggregates (labelled `retention.dev/aggregate-to-controller`), and every Role, when `roles`.
fn granted(yaml: &str, verb: &str, roles: bool) -> BTreeSet<(String, String)> {
    let mut granted = BTreeSet::new();
    for document in serde_norway::Deserializer::from_str(yaml) {
        let object = Value::deserialize(document).unwrap();
        let aggregated = object.pointer("/metadata/labels/retention.dev~1aggregate-to-controller")
            == Some(&Value::String("true".to_owned()));
        let kind = object["kind"].as_str().unwrap_or_default();
        if !(kind == "ClusterRole" && aggregated || kind == "Role" && roles) {
            continue;
        }
        for rule in object["rules"].as_array().into_iter().flatten() {
            let texts = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|text| text.as_str().map(str::to_owned))
                    .collect()
            };
            if !texts("verbs").iter().any(|granted| granted == verb) {
                continue;
            }
            for group in texts("apiGroups") {
                for resource in texts("resources") {
                    granted.insert((group.clone(), resource));
                }
            }
        }
    }
    granted
}

fn deployed(verb: &str) -> BTreeSet<(String, String)> {
    let mut all = granted(
        include_str!("../../../deploy/core/controller-rbac.yaml"),
        verb,
        false,
    );
    all.extend(granted(
        include_str!("../../../deploy/optional/cleaner-helm.yaml"),
        verb,
        true,
    ));
    all
}

#[test]
fn every_uninstallable_kind_is_one_the_default_install_lets_the_controller_read_and_delete() {
    let (gettable, deletable) = (deployed("get"), deployed("delete"));
    for known in UNINSTALLABLE_KINDS {
        let key = (known.group.to_owned(), known.plural.to_owned());
        assert!(deletable.contains(&key), "no delete on {key:?} in deploy/");
        assert!(gettable.contains(&key), "no get on {key:?} in deploy/");
    }
}

#[test]
fn every_kind_deploy_lets_the_controller_delete_is_uninstallable_or_left_out_for_a_reason() {
    let uninstallable: BTreeSet<(String, String)> = UNINSTALLABLE_KINDS
        .iter()
        .map(|known| (known.group.to_owned(), known.plural.to_owned()))
        .collect();
    let left_out: BTreeSet<(String, String)> = LEFT_OUT
        .iter()
        .map(|(group, plural, _why)| ((*group).to_owned(), (*plural).to_owned()))
        .collect();
    let deletable = deployed("delete");
    let undecided: Vec<_> = deletable
        .iter()
        .filter(|key| !uninstallable.contains(*key) && !left_out.contains(*key))
        .collect();
    assert!(
        undecided.is_empty(),
        "deploy/ lets the controller delete {undecided:?}: add them to UNINSTALLABLE_KINDS \
         (the webhook then asks a Cleaner's writer about them too) or to LEFT_OUT, saying why"
    );
    assert!(
        left_out.is_subset(&deletable),
        "LEFT_OUT names kinds deploy/ no longer grants: {:?}",
        left_out.difference(&deletable).collect::<Vec<_>>()
    );
}
