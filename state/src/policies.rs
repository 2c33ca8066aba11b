//! Retention policies as the state keeps them ([`PolicyBook`]): the checked policies by name, the
//! labels of namespaces (for `namespaceSelector`), and per policy what it governs now — for its
//! status: deletions made, objects contested with another policy, in dry run what it would have
//! deleted, and where its expressions went past a limit. A changed policy takes its objects'
//! deadlines away at once; the relist the loop starts for its kinds judges them afresh.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::governing::CandidatePolicy;
use kube_retention_common::governing::{Selected, selects};
use kube_retention_common::kinds::{Entry, Role};
pub use kube_retention_common::policies::PolicyKey;

use super::Reason;
use super::evaluation::{Exceeded, ExceededReport, PolicyAnswers, Unevaluated};
use super::guard::{GuardReport, Guards};
use super::keys::ObjectKey;
pub use super::loaded::{Approval, LoadedPolicy};
use super::record::Kept;
use super::runs::Runs;

/// What a policy governs now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub matched: u64,
    /// Of those, held by its `holdWhile`.
    pub on_hold: u64,
    pub next_deletion: Option<Timestamp>,
    /// In dry run: what would have gone, when and why, oldest first.
    pub would_delete: Vec<(ObjectKey, Timestamp, Reason)>,
    /// Objects on which its expressions went past their cost or time limit: how many, and
    /// the first by name with what went wrong.
    pub exceeded: Option<ExceededReport>,
    /// Where its generation stands with the blast-radius guard.
    pub guard: Option<GuardReport>,
}

/// How many would-be deletions a dry-run policy reports.
pub const WOULD_DELETE_SHOWN: usize = 20;

#[derive(Debug, Default)]
pub struct PolicyBook {
    policies: BTreeMap<Arc<PolicyKey>, LoadedPolicy>,
    namespace_labels: HashMap<Arc<str>, BTreeMap<String, String>>,
    would_delete: HashMap<Arc<PolicyKey>, BTreeMap<ObjectKey, (Timestamp, Reason)>>,
    exceeded: Exceeded,
    deletions: HashMap<PolicyKey, u64>,
    /// Objects two or more policies of a scope applied to: those that lost.
    contested: HashMap<ObjectKey, Vec<Arc<PolicyKey>>>,
}

impl PolicyBook {
    /// The valid policies that select `object` (of the kind `entry`) and have expressions to
    /// evaluate on it; empty where the object can be judged at once.
    pub(super) fn unevaluated(&self, entry: &Entry, object: &DynamicObject) -> Unevaluated {
        if entry.role == Role::Parent {
            return Vec::new();
        }
        let Some(namespace) = object.metadata.namespace.as_deref() else {
            return Vec::new();
        };
        let empty = BTreeMap::new();
        let api_version = entry.resource.api_version();
        let selected = Selected {
            api_version: &api_version,
            kind: &entry.resource.kind,
            labels: object.metadata.labels.as_ref().unwrap_or(&empty),
            namespace_labels: self.namespace_labels(namespace),
        };
        self.valid_in(namespace)
            .filter(|(key, loaded)| {
                loaded.rules.has_expressions()
                    && selects(&loaded.rules, key.namespace.is_some(), &selected)
            })
            .map(|(key, loaded)| (key.clone(), loaded.rules.clone()))
            .collect()
    }

    /// `key` as now loaded.
    pub(super) fn insert(&mut self, key: Arc<PolicyKey>, loaded: LoadedPolicy) {
        self.policies.insert(key, loaded);
    }

    /// Takes a policy out with what it reported; answers its key as the records hold it.
    pub(super) fn remove(&mut self, key: &PolicyKey) -> Option<(Arc<PolicyKey>, LoadedPolicy)> {
        let (key, loaded) = self.policies.remove_entry(key)?;
        self.would_delete.remove(&key);
        self.exceeded.forget_policy(&key);
        Some((key, loaded))
    }

    pub fn get(&self, key: &PolicyKey) -> Option<&LoadedPolicy> {
        self.policies.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&PolicyKey, &LoadedPolicy)> {
        self.policies.iter().map(|(key, loaded)| (&**key, loaded))
    }

    /// The kinds the valid policies govern.
    pub fn kinds(&self) -> Vec<ResourceRef> {
        let mut kinds: Vec<ResourceRef> = self
            .policies
            .values()
            .filter(|loaded| loaded.errors.is_empty())
            .flat_map(|loaded| loaded.rules.kinds.iter().cloned())
            .collect();
        kinds.sort_by(|a, b| (&a.api_version, &a.kind).cmp(&(&b.api_version, &b.kind)));
        kinds.dedup();
        kinds
    }

    /// How many deletions `key` caused.
    pub fn deletions(&self, key: &PolicyKey) -> u64 {
        self.deletions.get(key).copied().unwrap_or(0)
    }

    pub(super) fn deleted(&mut self, key: &PolicyKey) {
        *self.deletions.entry(key.clone()).or_default() += 1;
    }

    /// A namespace's labels; answers whether they changed.
    pub(super) fn set_namespace_labels(
        &mut self,
        name: Arc<str>,
        labels: BTreeMap<String, String>,
    ) -> bool {
        self.namespace_labels.insert(name, labels.clone()) != Some(labels)
    }

    pub(super) fn namespace_labels(&self, namespace: &str) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.namespace_labels.get(namespace).unwrap_or(&EMPTY)
    }

    /// The policies that may apply in `namespace`, in [`PolicyKey`] order: the cluster's, then
    /// the namespace's own. Two ranges of the ordered map, not a walk over every policy: each
    /// object event asks, and a tenant with ten thousand policies must not slow the events of
    /// every other namespace.
    fn applicable<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = (&'a Arc<PolicyKey>, &'a LoadedPolicy)> + use<'a> {
        let key = |namespace: Option<String>| PolicyKey {
            namespace,
            name: String::new(),
        };
        let cluster = key(None)..key(Some(String::new()));
        let own = key(Some(namespace.to_owned()))..key(Some(format!("{namespace}\0")));
        self.policies
            .range::<PolicyKey, _>(cluster)
            .chain(self.policies.range::<PolicyKey, _>(own))
    }

    /// The valid policies that may apply in `namespace`, in [`PolicyKey`] order.
    pub(super) fn valid_in<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = (&'a Arc<PolicyKey>, &'a LoadedPolicy)> + use<'a> {
        self.applicable(namespace)
            .filter(|(_, loaded)| loaded.valid_rules().is_some())
    }

    /// The valid policies that may apply in `namespace`, as the model judges with them, with
    /// their expressions' `answers` where evaluated ahead.
    pub(super) fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        answers: Option<&'a PolicyAnswers>,
    ) -> (Vec<&'a Arc<PolicyKey>>, Vec<CandidatePolicy<'a>>) {
        kube_retention_common::policies::candidates(
            self.applicable(namespace),
            namespace,
            LoadedPolicy::valid_rules,
            |key| answers.and_then(|answers| answers.get(key)),
        )
    }

    /// The policies that applied to `key` and lost (none: it is no longer contested).
    pub(super) fn set_overruled(&mut self, key: &ObjectKey, overruled: Vec<Arc<PolicyKey>>) {
        if overruled.is_empty() {
            self.contested.remove(key);
        } else {
            self.contested.insert(key.clone(), overruled);
        }
    }

    pub(super) fn overruled(&self, key: &ObjectKey) -> Vec<Arc<PolicyKey>> {
        self.contested.get(key).cloned().unwrap_or_default()
    }

    /// A dry-run `policy` would have deleted `key` now.
    pub(super) fn would_have_deleted(
        &mut self,
        policy: Arc<PolicyKey>,
        key: &ObjectKey,
        at: Timestamp,
        reason: Reason,
    ) {
        let report = self.would_delete.entry(policy).or_default();
        report.insert(key.clone(), (at, reason));
    }

    /// `key`, governed by `policy`, is gone: no report names it any more.
    pub(super) fn forget_object(&mut self, key: &ObjectKey, policy: Option<&Arc<PolicyKey>>) {
        self.contested.remove(key);
        self.exceeded.note(key, None);
        if let Some(policy) = policy
            && let Some(report) = self.would_delete.get_mut(policy)
        {
            report.remove(key);
        }
    }

    /// `answers` came back for `key`: where a policy's expressions went past a limit on it.
    pub(super) fn note_answers(&mut self, key: &ObjectKey, answers: Option<&PolicyAnswers>) {
        if answers.is_some() || !self.exceeded.is_empty() {
            self.exceeded.note(key, answers);
        }
    }

    /// What each policy governs now, from the records of `runs`, with where each stands with
    /// the blast-radius `guards`.
    pub(super) fn summaries(&self, runs: &Runs, guards: &Guards) -> HashMap<PolicyKey, Summary> {
        let mut summaries: HashMap<PolicyKey, Summary> = HashMap::new();
        for (_, record) in runs.iter() {
            let Some(policy) = &record.policy else {
                continue;
            };
            let summary = summaries.entry((**policy).clone()).or_default();
            summary.matched += 1;
            let on_hold = record.kept == Kept::OnHold;
            summary.on_hold += u64::from(on_hold);
            if !record.pending
                && !on_hold
                && let Some(deadline) = record.deadline()
            {
                summary.next_deletion = Some(
                    summary
                        .next_deletion
                        .map_or(deadline, |at| at.min(deadline)),
                );
            }
        }
        for (policy, report) in &self.would_delete {
            let summary = summaries.entry((**policy).clone()).or_default();
            let mut entries: Vec<(ObjectKey, Timestamp, Reason)> = report
                .iter()
                .map(|(key, (at, reason))| (key.clone(), *at, *reason))
                .collect();
            entries.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            entries.truncate(WOULD_DELETE_SHOWN);
            summary.would_delete = entries;
        }
        for key in self.policies.keys() {
            if let Some(report) = guards.report(key) {
                summaries.entry((**key).clone()).or_default().guard = Some(report);
            }
        }
        for (policy, report) in self.exceeded.first_each() {
            let summary = summaries.entry((**policy).clone()).or_default();
            summary.exceeded = Some(report);
        }
        summaries
    }
}

/// Limits groups of a policy are named `{policy}\u{1f}{value of groupBy}`.
pub(super) fn policy_group_prefix(key: &PolicyKey) -> String {
    format!(
        "{}/{}\u{1f}",
        key.namespace.as_deref().unwrap_or_default(),
        key.name
    )
}
