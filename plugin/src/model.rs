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
use kube_retention_common::annotations::{EXPIRES_AT, KEEP, SNOOZED_UNTIL};
use kube_retention_common::api::{ClusterRetentionPolicy, PolicyRules, RetentionPolicy};
use kube_retention_common::duration;
use kube_retention_common::expiry::Expiry;
use kube_retention_common::governing::{Judgement, Subject, judge};
use kube_retention_common::kinds::{Entry, Lookup, Registry, Resource};
use kube_retention_common::model::object_value;
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
    /// Its `retention.dev/snoozed-until`, where that pushed the deadline (`kubectl retention
    /// snooze`).
    pub snoozed_until: Option<Timestamp>,
    /// When the controller warns with a `RetentionExpiring` Event: the deadline less
    /// `notifyBefore` (the governing policy's) or `retention.dev/notify-before`.
    pub notice_at: Option<Timestamp>,
    /// Why it is never deleted, or not yet; else its snooze and notice.
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
    let value = object_value(resource, object).unwrap_or_default();
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
    let deadline = judgement.expiry.deadline();
    let snoozed_until = judgement.expiry.snoozed(&judgement.own.annotations);
    let notice_at = judgement.notice_at();
    let note = note.or_else(|| announced(snoozed_until, notice_at, judgement.notify_before));
    Explanation {
        kind: resource.kind.clone(),
        namespace,
        name: object.name_any(),
        state: state(judgement.progress).to_owned(),
        deadline,
        expires_at: object.annotations().get(EXPIRES_AT).cloned(),
        source,
        setting,
        overruled: judgement
            .overruled
            .iter()
            .filter_map(|&index| names.get(index).cloned())
            .collect(),
        on_hold: judgement.on_hold,
        snoozed_until,
        notice_at,
        note,
    }
}

/// What the note says of a deadline that stands: its snooze, and its notice.
fn announced(
    snoozed_until: Option<Timestamp>,
    notice_at: Option<Timestamp>,
    before: Option<std::time::Duration>,
) -> Option<String> {
    let snooze = snoozed_until.map(|until| format!("snoozed until {until} ({SNOOZED_UNTIL})"));
    let notice = notice_at
        .zip(before)
        .map(|(at, before)| format!("notice at {at}, {} ahead", duration::format(before)));
    let said: Vec<String> = snooze.into_iter().chain(notice).collect();
    (!said.is_empty()).then(|| said.join("; "))
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
        snoozed_until: None,
        notice_at: None,
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
mod tests;
