//! The controller's decision for one object, from the same model the controller runs
//! (`kube_retention_common::governing::judge`): the object's own settings, its kind's fields, and
//! the RetentionPolicies and ClusterRetentionPolicies that apply — plus where the deciding
//! setting comes from, said in words.

use std::collections::BTreeMap;

use anyhow::Result;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use kube_retention_common::annotations::{EXPIRES_AT, KEEP};
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::expiry::Expiry;
use kube_retention_common::governing::{Candidate, Judgement, Subject, judge};
use kube_retention_common::kinds::{Entry, Registry, Resource};
use kube_retention_common::policies::Rules;
use kube_retention_common::progress::{Outcome, Progress};
use serde::Serialize;

/// The policies of the cluster, read once: namespaced ones by namespace, then cluster ones.
pub struct Policies {
    namespaced: BTreeMap<String, Vec<(String, Rules)>>,
    cluster: Vec<(String, Rules)>,
    namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl Policies {
    pub async fn load(client: &Client) -> Result<Self> {
        let mut namespaced: BTreeMap<String, Vec<(String, Rules)>> = BTreeMap::new();
        for policy in Api::<RetentionPolicy>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items
        {
            let (rules, errors) = Rules::read(&policy.spec.rules, None);
            if errors.is_empty() {
                namespaced
                    .entry(policy.namespace().unwrap_or_default())
                    .or_default()
                    .push((policy.name_any(), rules));
            }
        }
        let mut cluster = Vec::new();
        for policy in Api::<ClusterRetentionPolicy>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items
        {
            let selector = policy
                .spec
                .namespace_selector
                .as_ref()
                .and_then(|selector| serde_json::to_value(selector).ok());
            let (rules, errors) = Rules::read(&policy.spec.rules, selector.as_ref());
            if errors.is_empty() {
                cluster.push((policy.name_any(), rules));
            }
        }
        let namespaces = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let namespace_labels = namespaces
            .into_iter()
            .map(|namespace| (namespace.name_any(), namespace.labels().clone()))
            .collect();
        Ok(Self {
            namespaced,
            cluster,
            namespace_labels,
        })
    }
}

/// What the controller decides for an object, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// running, succeeded, failed, or not-a-run.
    pub state: String,
    /// When it is deleted, if a deadline applies.
    pub deadline: Option<Timestamp>,
    /// The annotation the webhook or controller stamped, for comparison.
    pub expires_at: Option<String>,
    /// Where the deciding setting comes from.
    pub source: String,
    /// Policies that applied too and lost to an earlier deadline.
    pub overruled: Vec<String>,
    /// Why it is never deleted, or not yet.
    pub note: Option<String>,
}

/// Judges `object` of `resource` as the controller would at `now`.
pub fn explain(
    resource: &Resource,
    object: &DynamicObject,
    policies: &Policies,
    now: Timestamp,
) -> Explanation {
    let value = serde_json::to_value(object).unwrap_or_default();
    let entry = Registry::builtin()
        .entry_for(&value)
        .cloned()
        .unwrap_or_else(|| Entry::plain(resource.clone()));
    let namespace = object.namespace().unwrap_or_default();
    let mut names = Vec::new();
    let mut candidates = Vec::new();
    for (name, rules) in policies.namespaced.get(&namespace).into_iter().flatten() {
        names.push(format!("RetentionPolicy {namespace}/{name}"));
        candidates.push(Candidate {
            namespaced: true,
            rules,
            answers: None,
        });
    }
    for (name, rules) in &policies.cluster {
        names.push(format!("ClusterRetentionPolicy {name}"));
        candidates.push(Candidate {
            namespaced: false,
            rules,
            answers: None,
        });
    }
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
    let source = source(&judgement, &names);
    let note = match judgement.expiry {
        Expiry::Keep => Some(format!("never deleted: annotated {KEEP}: \"true\"")),
        Expiry::Never => Some("never deleted: no TTL applies to it".to_owned()),
        Expiry::NotYet => {
            Some("not yet: a TTL applies once it finishes, and it is running".to_owned())
        }
        Expiry::Deadline(_) | Expiry::At(_) => None,
    };
    Explanation {
        kind: resource.kind.clone(),
        namespace,
        name: object.name_any(),
        state: state(judgement.progress).to_owned(),
        deadline: judgement.expiry.deadline(),
        expires_at: object.annotations().get(EXPIRES_AT).cloned(),
        source,
        overruled: judgement
            .overruled
            .iter()
            .filter_map(|&index| names.get(index).cloned())
            .collect(),
        note,
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

fn source(judgement: &Judgement, names: &[String]) -> String {
    if let Some(index) = judgement.policy {
        return names.get(index).cloned().unwrap_or_default();
    }
    let own = &judgement.own;
    let annotations = &own.annotations;
    if annotations.keep {
        format!("annotation {KEEP}")
    } else if annotations.ttl.is_some()
        || annotations.after_succeeded.is_some()
        || annotations.after_failed.is_some()
        || annotations.after_finished.is_some()
    {
        "the object's retention.dev/ annotations".to_owned()
    } else if !own.own.is_empty() {
        "the object's own retention fields".to_owned()
    } else if !own.inherited.is_empty() {
        "its Build's retention (the snapshot its controller keeps)".to_owned()
    } else if annotations.own_deadline().is_some() {
        format!("a hand-written {EXPIRES_AT}")
    } else {
        "nothing: no annotation, field or policy applies".to_owned()
    }
}
