//! What admission reads of an object, as a [`Keep`] plan for [`super::lean`]: said here, by
//! kind, from the same tables the model reads with ([`kube_retention_common::kinds`]), so a
//! kind added to the registry is read with its fields. A policy or a Cleaner is read whole but
//! its `managedFields` and its status; any other object for its metadata (the `retention.dev/` annotations,
//! the labels admission reads or writes, its owners' uids, its names and times), the retention
//! fields of its kind, the status its finish rule reads and the field naming its parent.
//!
//! The finish rules are code in `kube_retention_common::progress`; `finish_rule` restates the
//! fields each reads, and the differential test (`tests/testsuite/lean_reviews.rs`) holds both
//! to the same verdicts on generated objects of every kind.

use kube_retention_common::annotations::{MANAGED_LABEL, PREFIX};
use kube_retention_common::kinds::{Entry, NameSource, RunFields, TtlFields};
use kube_retention_common::progress::FinishRule;

use super::lean::Keep;

/// The plan for a policy or a Cleaner: everything but `metadata.managedFields` and the
/// status, which the controller writes and admission never reads (a Cleaner's names each target
/// it resolved: thousands, for a Cleaner awaiting approval of a large clean, whose approval is an
/// update of the Cleaner).
pub fn ours() -> Keep {
    let mut plan = Keep::all_but(&["metadata", "status"]);
    plan.add(
        "metadata",
        Keep::all_but(&["managedFields", "annotations", "labels"]).without_nulls(),
    );
    plan.add("metadata", metadata(None));
    plan
}

/// The plan for an object of the kind `entry` describes (`None`: a kind switched off, of
/// which only the annotations are read).
pub fn object(entry: Option<&Entry>) -> Keep {
    let mut plan = Keep::only([]);
    plan.add("metadata", metadata(entry));
    let Some(entry) = entry else {
        return plan;
    };
    let fields = &entry.fields;
    for ttls in fields.own.iter().chain(&fields.snapshot) {
        ttl_fields(&mut plan, ttls);
    }
    for runs in fields.embedded.iter().chain(&fields.runs) {
        run_fields(&mut plan, runs);
    }
    if let Some(parent) = entry.parent() {
        for source in parent.name {
            if let NameSource::Field(path) = source {
                plan.add(path, Keep::All);
            }
        }
    }
    finish_rule(&mut plan, entry.finish);
    plan
}

/// An object's metadata: its names, uid, generation and times; the `retention.dev/`
/// annotations and the one naming its parent; the managed label and the one naming its
/// parent; its owners' uids. Null fields left out, as `ObjectMeta` leaves them out.
fn metadata(entry: Option<&Entry>) -> Keep {
    let scalars = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
    ];
    let mut annotations = Keep::only([]).with_prefix(PREFIX);
    let mut labels = Keep::only([(MANAGED_LABEL.to_owned(), Keep::All)]);
    if let Some(parent) = entry.and_then(Entry::parent) {
        for source in parent.name {
            match source {
                NameSource::Label(key) => labels.add_key(key),
                NameSource::Annotation(key) => annotations.add_key(key),
                NameSource::Field(_) => {}
            }
        }
    }
    let owners = Keep::only([("uid".to_owned(), Keep::All)]);
    let mut plan = Keep::only(
        scalars
            .iter()
            .map(|key| ((*key).to_owned(), Keep::All))
            .chain([
                ("annotations".to_owned(), annotations),
                ("labels".to_owned(), labels),
                ("ownerReferences".to_owned(), owners),
            ]),
    );
    plan = plan.without_nulls();
    plan
}

/// A pair of TTL fields: the object holding them (quoted in a denial when it is not one) and
/// each field.
fn ttl_fields(plan: &mut Keep, ttls: &TtlFields) {
    plan.add(ttls.within, Keep::only([]).quoted());
    plan.add(&ttls.succeeded_path(), Keep::All);
    plan.add(&ttls.failed_path(), Keep::All);
}

/// What a parent sets for its runs: the TTLs, the limits, and whether they are owned by it.
fn run_fields(plan: &mut Keep, runs: &RunFields) {
    ttl_fields(plan, &runs.ttls);
    let within = runs.ttls.within;
    let limits = &runs.limits;
    for name in [limits.succeeded, limits.failed]
        .into_iter()
        .chain(runs.owned_by_parent)
    {
        plan.add(&format!("{within}.{name}"), Keep::All);
    }
}

/// The status each finish rule reads ([`FinishRule::progress`]).
fn finish_rule(plan: &mut Keep, rule: FinishRule) {
    let condition = || {
        Keep::only(["type", "status", "lastTransitionTime"].map(|key| (key.to_owned(), Keep::All)))
    };
    match rule {
        FinishRule::SucceededCondition { .. } | FinishRule::JobConditions => {
            plan.add("status.conditions", condition());
            plan.add("status.completionTime", Keep::All);
        }
        FinishRule::PodPhase => {
            plan.add("status.phase", Keep::All);
            for statuses in [
                "initContainerStatuses",
                "containerStatuses",
                "ephemeralContainerStatuses",
            ] {
                plan.add(
                    &format!("status.{statuses}.state.terminated.finishedAt"),
                    Keep::All,
                );
            }
        }
        FinishRule::OpenShiftPhase => {
            plan.add("status.phase", Keep::All);
            plan.add("status.completionTimestamp", Keep::All);
        }
        FinishRule::NotARun => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_retention_common::Registry;
    use serde_json::{Value, json};

    use crate::review::lean::{Budget, decode};

    fn lean(value: &Value, plan: &Keep) -> Value {
        decode(
            &value.to_string(),
            plan,
            &mut Budget::new(usize::MAX, &mut ()),
        )
        .unwrap()
    }

    fn entry(api_version: &str, kind: &str) -> &'static Entry {
        Registry::entry_of(&json!({"apiVersion": api_version, "kind": kind}))
    }

    #[test]
    fn a_job_keeps_its_metadata_and_conditions_not_its_template() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "labels": {"app": "a", "retention.dev/managed": "true"},
                         "annotations": {"retention.dev/ttl": "1h", "note": "x"},
                         "managedFields": [{"manager": "kubectl"}],
                         "ownerReferences": [{"uid": "u", "name": "cron", "kind": "CronJob"}]},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"conditions": [{"type": "Complete", "status": "True", "message": "m",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                       "completionTime": "2024-01-01T00:00:00Z", "succeeded": 1}});
        assert_eq!(
            lean(&job, &object(Some(entry("batch/v1", "Job")))),
            json!({
                "metadata": {"name": "j", "labels": {"retention.dev/managed": "true"},
                             "annotations": {"retention.dev/ttl": "1h"},
                             "ownerReferences": [{"uid": "u"}]},
                "status": {"conditions": [{"type": "Complete", "status": "True",
                                           "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                           "completionTime": "2024-01-01T00:00:00Z"}})
        );
    }

    #[test]
    fn a_buildrun_keeps_its_retention_blocks_and_its_builds_name() {
        let run = json!({
            "metadata": {"labels": {"build.shipwright.io/name": "b", "x": "y"}},
            "spec": {"build": {"name": "b", "spec": {"retention": {"ttlAfterFailed": "1h",
                                                                 "atBuildDeletion": true},
                                                   "source": {"git": "url"}}},
                     "retention": "oops", "paramValues": [1]},
            "status": {"buildSpec": {"retention": {"ttlAfterSucceeded": "2h"}, "strategy": {}}}});
        let plan = object(Some(entry("shipwright.io/v1beta1", "BuildRun")));
        assert_eq!(
            lean(&run, &plan),
            json!({
                "metadata": {"labels": {"build.shipwright.io/name": "b"}},
                "spec": {"build": {"name": "b", "spec": {"retention": {"ttlAfterFailed": "1h",
                                                                     "atBuildDeletion": true}}},
                         "retention": "oops"},
                "status": {"buildSpec": {"retention": {"ttlAfterSucceeded": "2h"}}}})
        );
    }

    #[test]
    fn a_policy_is_kept_whole_but_its_managed_fields_and_its_status() {
        let policy = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                            "metadata": {"name": "p", "managedFields": [{}], "generation": 2,
                                         "labels": {"team": "a"}},
                            "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}]},
                            "status": {"conditions": []}});
        let mut expected = policy.clone();
        expected["metadata"] = json!({"name": "p", "generation": 2, "labels": {}});
        expected.as_object_mut().unwrap().remove("status");
        assert_eq!(lean(&policy, &ours()), expected);
    }

    #[test]
    fn a_cleaner_awaiting_approval_of_a_large_clean_is_read_without_its_targets() {
        let resolved: Vec<String> = (0..10_001)
            .map(|index| format!("ConfigMap/burst-{index}"))
            .collect();
        let cleaner = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
                             "metadata": {"name": "c", "namespace": "t"},
                             "spec": {"targets": [{"name": "maps", "delete": true,
                                                   "reference": {"version": "v1", "kind": "ConfigMap"}}]},
                             "status": {"resolvedTargets": resolved, "conditions": []}});
        let kept = lean(&cleaner, &ours());
        assert_eq!(kept["spec"], cleaner["spec"]);
        assert!(kept.get("status").is_none(), "{kept}");
    }
}
