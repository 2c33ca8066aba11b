//! The controller's decision for one object, from the same model the controller runs
//! (`kube_retention_common::governing::judge`): the object's own settings, its kind's fields, and
//! the RetentionPolicies and ClusterRetentionPolicies that apply — plus the setting that decided
//! (`kube_retention_common::setting`), said as written: `spec.retention.ttlAfterSucceeded: 2h`.

use std::collections::BTreeMap;

use anyhow::Result;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use kube_retention_common::annotations::{EXPIRES_AT, KEEP};
use kube_retention_common::api::{ClusterRetentionPolicy, PolicyRules, RetentionPolicy};
use kube_retention_common::expiry::Expiry;
use kube_retention_common::governing::{Judgement, Subject, judge};
use kube_retention_common::kinds::{Entry, Lookup, Registry, Resource};
use kube_retention_common::policies::{self, PolicyKey, PolicyObject, Rules};
use kube_retention_common::progress::{Outcome, Progress};
use kube_retention_common::setting::{self, NamedPolicy, Said, Setting};
use serde::Serialize;

/// The policies of the cluster, read once: the valid ones by name, checked and as written, and
/// the labels of namespaces (for `namespaceSelector`).
pub struct Policies {
    valid: BTreeMap<PolicyKey, (Rules, PolicyRules)>,
    namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl Policies {
    pub async fn load(client: &Client) -> Result<Self> {
        let mut policies = Self {
            valid: BTreeMap::new(),
            namespace_labels: BTreeMap::new(),
        };
        let params = ListParams::default();
        for policy in Api::<RetentionPolicy>::all(client.clone())
            .list(&params)
            .await?
        {
            policies.add(&policy);
        }
        for policy in Api::<ClusterRetentionPolicy>::all(client.clone())
            .list(&params)
            .await?
        {
            policies.add(&policy);
        }
        for namespace in Api::<Namespace>::all(client.clone()).list(&params).await? {
            let labels = namespace.labels().clone();
            policies
                .namespace_labels
                .insert(namespace.name_any(), labels);
        }
        Ok(policies)
    }

    /// Keeps `policy` if it is valid: an invalid one governs nothing, as in the controller.
    fn add(&mut self, policy: &impl PolicyObject) {
        let (rules, errors) = policy.rules();
        if errors.is_empty() {
            self.valid
                .insert(policy.key(), (rules, policy.spec().clone()));
        }
    }
}

/// What the controller decides for an object, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// running, succeeded, failed, not-a-run, or left-alone (a kind the controller was told to
    /// leave alone).
    pub state: String,
    /// When it is deleted, if a deadline applies.
    pub deadline: Option<Timestamp>,
    /// The annotation the webhook or controller stamped, for comparison.
    pub expires_at: Option<String>,
    /// The deciding setting as written (`annotation retention.dev/ttl-after-finished: 30m`), or
    /// why there is none.
    pub source: String,
    /// The deciding setting, field by field.
    pub setting: Option<Said>,
    /// Policies that applied too and lost to an earlier deadline.
    pub overruled: Vec<String>,
    /// The governing policy's `holdWhile` holds it: not deleted while it does, deadline or not.
    pub on_hold: bool,
    /// Why it is never deleted, or not yet.
    pub note: Option<String>,
}

/// Judges `object` of `resource` as the controller would at `now`, with the controller's
/// `kinds`.
pub fn explain(
    kinds: &Registry,
    resource: &Resource,
    object: &DynamicObject,
    policies: &Policies,
    now: Timestamp,
) -> Explanation {
    let value = serde_json::to_value(object).unwrap_or_default();
    let namespace = object.namespace().unwrap_or_default();
    let entry = match kinds.lookup(&value) {
        Lookup::Listed(entry) => entry.clone(),
        // Judged with a plain entry of its own, as the controller adds one.
        Lookup::Unlisted => Entry::plain(resource.clone()),
        Lookup::SwitchedOff => return left_alone(resource, object, namespace),
    };
    let (keys, candidates) = policies::candidates(
        &policies.valid,
        &namespace,
        |(rules, _)| Some(rules),
        |_| None,
    );
    let names: Vec<String> = keys.iter().map(ToString::to_string).collect();
    let specs: Vec<&PolicyRules> = keys.iter().map(|key| &policies.valid[*key].1).collect();
    let labels: BTreeMap<String, String> = object.labels().clone();
    let empty = BTreeMap::new();
    let subject = Subject {
        entry: &entry,
        object: &value,
        labels: &labels,
        namespace_labels: policies.namespace_labels.get(&namespace).unwrap_or(&empty),
        created: object.creation_timestamp().map(|time| time.0),
    };
    let judgement = judge(&subject, &candidates, now);
    let named = |at: usize| -> Option<NamedPolicy<'_>> { Some((names.get(at)?, specs.get(at)?)) };
    let said = |setting: &Setting| setting.said(named);
    let setting = setting::deciding(&judgement, &subject).map(|setting| said(&setting));
    let pending: Vec<(Outcome, Said)> = setting::pending(&judgement, &subject)
        .iter()
        .map(|(outcome, setting)| (*outcome, said(setting)))
        .collect();
    let source = source(&judgement, setting.as_ref(), &pending, &names);
    let note = match judgement.expiry {
        Expiry::Keep => Some(format!("never deleted: annotated {KEEP}: \"true\"")),
        Expiry::Never => Some("never deleted: no TTL applies to it".to_owned()),
        Expiry::NotYet => {
            Some("not yet: a TTL applies once it finishes, and it is running".to_owned())
        }
        Expiry::Deadline(_) | Expiry::At(_) => None,
    };
    let note = note.or_else(|| {
        let index = judgement.policy.filter(|_| judgement.on_hold)?;
        let expression = specs.get(index)?.hold_while.as_deref().unwrap_or_default();
        Some(format!(
            "on hold: spec.holdWhile of {} holds it ({expression}); deleted once that is false, \
             past its deadline or not",
            names.get(index)?
        ))
    });
    Explanation {
        kind: resource.kind.clone(),
        namespace,
        name: object.name_any(),
        state: state(judgement.progress).to_owned(),
        deadline: judgement.expiry.deadline(),
        expires_at: object.annotations().get(EXPIRES_AT).cloned(),
        source,
        setting,
        overruled: judgement
            .overruled
            .iter()
            .filter_map(|&index| names.get(index).cloned())
            .collect(),
        on_hold: judgement.on_hold,
        note,
    }
}

/// A built-in kind the controller was told to leave alone (`--disable-kind`).
fn left_alone(resource: &Resource, object: &DynamicObject, namespace: String) -> Explanation {
    Explanation {
        kind: resource.kind.clone(),
        namespace,
        name: object.name_any(),
        state: "left-alone".to_owned(),
        deadline: None,
        expires_at: object.annotations().get(EXPIRES_AT).cloned(),
        source: format!("nothing: the controller leaves {resource} alone (--disable-kind)"),
        setting: None,
        overruled: Vec::new(),
        on_hold: false,
        note: Some(format!(
            "never deleted by kube-retention: its controller runs with --disable-kind {resource}"
        )),
    }
}

fn state(progress: Progress) -> &'static str {
    match progress {
        Progress::Running => "running",
        Progress::Finished(finished) if finished.outcome == Outcome::Succeeded => "succeeded",
        Progress::Finished(_) => "failed",
        Progress::NotARun => "not-a-run",
    }
}

fn source(
    judgement: &Judgement,
    setting: Option<&Said>,
    pending: &[(Outcome, Said)],
    names: &[String],
) -> String {
    if let Some(setting) = setting {
        return setting.to_string();
    }
    if let Some(index) = judgement.policy {
        return names.get(index).cloned().unwrap_or_default();
    }
    match pending {
        [] => "nothing: no annotation, field or policy applies".to_owned(),
        [(_, first), (_, second)] if first == second => format!("once it finishes: {first}"),
        each => {
            let each: Vec<String> = each
                .iter()
                .map(|(outcome, said)| match outcome {
                    Outcome::Succeeded => format!("{said} if it succeeds"),
                    Outcome::Failed => format!("{said} if it fails"),
                })
                .collect();
            format!("once it finishes: {}", each.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // fixtures

    use serde_json::{Value, json};

    use super::*;

    fn explained(object: Value, policies: &Policies) -> Explanation {
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let now = "2026-06-01T12:00:00Z".parse().unwrap();
        explain(
            Registry::builtin(),
            &Resource::new("", "v1", "U", "us"),
            &object,
            policies,
            now,
        )
    }

    /// No policies, or one RetentionPolicy `team-a/NAME`.
    fn policies(policy: Option<(&str, Value)>) -> Policies {
        let mut policies = Policies {
            valid: BTreeMap::new(),
            namespace_labels: BTreeMap::new(),
        };
        if let Some((name, spec)) = policy {
            let policy: RetentionPolicy = serde_json::from_value(json!({
                "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
                "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}))
            .unwrap();
            policies.add(&policy);
            assert_eq!(policies.valid.len(), 1, "{policy:?} is invalid");
        }
        policies
    }

    fn buildrun(annotations: Value, spec: Value, status: Value) -> Value {
        json!({"apiVersion": "shipwright.io/v1beta1", "kind": "BuildRun",
               "metadata": {"name": "run", "namespace": "team-a", "annotations": annotations,
                            "labels": {"build.shipwright.io/name": "hello"}},
               "spec": spec, "status": status})
    }

    #[test]
    fn says_an_inherited_setting_and_the_build_it_comes_from() {
        let failed = json!({"completionTime": "2026-06-01T11:00:00Z",
                            "buildSpec": {"retention": {"ttlAfterFailed": "10m"}},
                            "conditions": [{"type": "Succeeded", "status": "False"}]});
        let it = explained(buildrun(json!({}), json!({}), failed), &policies(None));
        assert_eq!(
            it.source,
            "status.buildSpec.retention.ttlAfterFailed: 10m (from Build hello)"
        );
        assert_eq!(it.deadline, Some("2026-06-01T11:10:00Z".parse().unwrap()));
        assert_eq!(
            serde_json::to_value(&it).unwrap()["setting"],
            json!({"kind": "inherited", "name": "status.buildSpec.retention.ttlAfterFailed",
                   "value": "10m", "from": "Build hello"})
        );
    }

    #[test]
    fn says_a_policy_field_as_its_spec_writes_it() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "j", "namespace": "team-a"},
                         "status": {"conditions": [{"type": "Failed", "status": "True",
                                    "lastTransitionTime": "2026-06-01T11:00:00Z"}]}});
        let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                          "ttlAfterFailed": "120m"});
        let it = explained(job, &policies(Some(("jobs", spec))));
        assert_eq!(
            it.source,
            "RetentionPolicy team-a/jobs: ttlAfterFailed 120m"
        );
        assert_eq!(it.deadline, Some("2026-06-01T13:00:00Z".parse().unwrap()));
    }

    #[test]
    fn says_an_object_is_on_hold_while_the_policys_hold_while_is_true() {
        let job = |annotations: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "j", "namespace": "team-a", "annotations": annotations},
                   "status": {"conditions": [{"type": "Failed", "status": "True",
                              "lastTransitionTime": "2026-06-01T11:00:00Z"}]}})
        };
        let spec = json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                          "ttlAfterFailed": "10m",
                          "holdWhile": "!has(object.metadata.annotations.archived)"});
        let policies = policies(Some(("jobs", spec)));
        let held = explained(job(json!({})), &policies);
        assert!(held.on_hold);
        assert_eq!(held.deadline, Some("2026-06-01T11:10:00Z".parse().unwrap()));
        assert_eq!(
            held.note.as_deref(),
            Some(
                "on hold: spec.holdWhile of RetentionPolicy team-a/jobs holds it \
                 (!has(object.metadata.annotations.archived)); deleted once that is false, past \
                 its deadline or not"
            )
        );
        let archived = explained(job(json!({"archived": "yes"})), &policies);
        assert!(!archived.on_hold);
        assert_eq!(archived.note, None);
    }

    #[test]
    fn says_what_will_decide_once_a_run_finishes() {
        let annotations = json!({"retention.dev/ttl-after-failed": "5m"});
        let spec = json!({"retention": {"ttlAfterSucceeded": "1h"}});
        let it = explained(buildrun(annotations, spec, json!({})), &policies(None));
        assert_eq!(
            it.source,
            "once it finishes: spec.retention.ttlAfterSucceeded: 1h if it succeeds; \
             annotation retention.dev/ttl-after-failed: 5m if it fails"
        );
        let finished = json!({"retention.dev/ttl-after-finished": "30m"});
        let it = explained(buildrun(finished, json!({}), json!({})), &policies(None));
        assert_eq!(
            it.source,
            "once it finishes: annotation retention.dev/ttl-after-finished: 30m"
        );
        assert_eq!(it.setting, None);
    }

    #[test]
    fn judges_with_the_controllers_kinds_leaving_a_disabled_kind_alone() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "j", "namespace": "team-a",
                                      "annotations": {"retention.dev/ttl-after-finished": "1h"}},
                         "status": {"conditions": [{"type": "Complete", "status": "True",
                                    "lastTransitionTime": "2026-06-01T11:00:00Z"}]}});
        let object: DynamicObject = serde_json::from_value(job).unwrap();
        let now = "2026-06-01T12:00:00Z".parse().unwrap();
        let jobs = Resource::new("batch", "v1", "Job", "jobs");
        let judged = |kinds: &Registry| explain(kinds, &jobs, &object, &policies(None), now);
        assert_eq!(
            judged(Registry::builtin()).deadline,
            Some("2026-06-01T12:00:00Z".parse().unwrap())
        );
        let selection = kube_retention_common::kinds::KindSelection {
            disabled_kinds: vec!["Job.batch".into()],
            ..Default::default()
        };
        let it = judged(&selection.registry().unwrap());
        assert_eq!((it.state.as_str(), it.deadline), ("left-alone", None));
        assert_eq!(
            it.source,
            "nothing: the controller leaves Job.batch alone (--disable-kind)"
        );
    }
}
