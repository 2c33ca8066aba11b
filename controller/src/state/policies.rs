//! Retention policies in the state: the checked policies by name, the labels of namespaces (for
//! `namespaceSelector`), and per policy what it governs now — for its status, and in dry run
//! what it would have deleted. A changed policy takes its objects' deadlines away at once; the
//! relist the loop starts for its kinds judges them afresh under the new settings.

use std::collections::{BTreeMap, HashMap};

use kube_retention_common::FieldError;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::governing::{CandidatePolicy, Judgement, Subject, judge};
pub use kube_retention_common::policies::PolicyKey;

use super::evaluation::PolicyAnswers;
use kube_retention_common::policies::Rules;

use super::*;

#[derive(Debug)]
pub struct LoadedPolicy {
    /// Shared with the evaluator, which runs its expressions off the loop.
    pub rules: Arc<Rules>,
    pub errors: Vec<FieldError>,
    pub generation: Option<i64>,
}

impl LoadedPolicy {
    /// Its rules, where it is valid (an invalid policy governs nothing).
    pub fn valid_rules(&self) -> Option<&Rules> {
        self.errors.is_empty().then_some(&*self.rules)
    }
}

/// What a policy governs now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub matched: u64,
    pub next_deletion: Option<Timestamp>,
    /// In dry run: what would have gone, when and why, oldest first.
    pub would_delete: Vec<(ObjectKey, Timestamp, Reason)>,
    /// Objects on which its expressions went past their cost or time limit: how many, and
    /// the first by name with what went wrong.
    pub exceeded: Option<(usize, ObjectKey, String)>,
}

/// How many would-be deletions a dry-run policy reports.
pub const WOULD_DELETE_SHOWN: usize = 20;

impl State {
    /// A policy was added or changed; answers the kinds to list afresh (before and after).
    pub fn policy_applied(&mut self, key: PolicyKey, loaded: LoadedPolicy) -> Vec<ResourceRef> {
        let key = Arc::new(key);
        let mut kinds = self.policy_removed(&key);
        kinds.extend(loaded.rules.kinds.iter().cloned());
        self.policies.insert(key, loaded);
        kinds
    }

    /// A policy is gone (or about to change): its objects wait to be judged afresh. Answers its
    /// kinds.
    pub fn policy_removed(&mut self, key: &PolicyKey) -> Vec<ResourceRef> {
        let Some((key, loaded)) = self.policies.remove_entry(key) else {
            return Vec::new();
        };
        let governed: Vec<ObjectKey> = self
            .runs
            .iter()
            .filter(|(_, record)| record.policy.as_ref() == Some(&key))
            .map(|(run, _)| run.clone())
            .collect();
        for run in governed {
            if let Some(record) = self.runs.get_mut(&run) {
                record.deadline = None;
                record.policy = None;
            }
            self.reschedule(&run);
        }
        self.would_delete.remove(&key);
        self.exceeded.remove(&key);
        let prefix = policy_group_prefix(&key);
        self.limits
            .retain(|group, _| !group.parent.starts_with(&prefix));
        loaded.rules.kinds.clone()
    }

    /// A namespace's labels; answers whether they changed (cluster policies may select it
    /// differently now).
    pub fn namespace_applied(&mut self, name: &str, labels: BTreeMap<String, String>) -> bool {
        let name = self.intern(name);
        self.namespace_labels.insert(name, labels.clone()) != Some(labels)
    }

    /// The kinds the valid policies govern.
    pub fn policy_kinds(&self) -> Vec<ResourceRef> {
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

    pub fn policy(&self, key: &PolicyKey) -> Option<&LoadedPolicy> {
        self.policies.get(key)
    }

    pub fn policies(&self) -> impl Iterator<Item = (&PolicyKey, &LoadedPolicy)> {
        self.policies.iter().map(|(key, loaded)| (&**key, loaded))
    }

    /// The valid policies that may apply in `namespace`, as the model judges with them, with
    /// their expressions' `answers` where evaluated ahead.
    pub(super) fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        answers: Option<&'a PolicyAnswers>,
    ) -> (Vec<&'a Arc<PolicyKey>>, Vec<CandidatePolicy<'a>>) {
        kube_retention_common::policies::candidates(
            &self.policies,
            namespace,
            LoadedPolicy::valid_rules,
            |key| answers.and_then(|answers| answers.get(key)),
        )
    }

    /// A dry-run policy would have deleted `key` now.
    pub(super) fn would_have_deleted(&mut self, key: &ObjectKey, at: Timestamp, reason: Reason) {
        let Some(record) = self.runs.get_mut(key) else {
            return;
        };
        record.pending = true;
        if let Some(policy) = record.policy.clone() {
            let report = self.would_delete.entry(policy).or_default();
            report.insert(key.clone(), (at, reason));
        }
    }

    /// A deletion a policy caused succeeded.
    pub fn policy_deleted(&mut self, key: &PolicyKey) {
        *self.deletions.entry(key.clone()).or_default() += 1;
    }

    pub fn deletions(&self, key: &PolicyKey) -> u64 {
        self.deletions.get(key).copied().unwrap_or(0)
    }

    /// What each policy governs now.
    pub fn summaries(&self) -> HashMap<PolicyKey, Summary> {
        let mut summaries: HashMap<PolicyKey, Summary> = HashMap::new();
        for record in self.runs.values() {
            let Some(policy) = &record.policy else {
                continue;
            };
            let summary = summaries.entry((**policy).clone()).or_default();
            summary.matched += 1;
            if !record.pending
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
        for (policy, objects) in &self.exceeded {
            if let Some((key, how)) = objects.first_key_value() {
                let summary = summaries.entry((**policy).clone()).or_default();
                summary.exceeded = Some((objects.len(), key.clone(), how.clone()));
            }
        }
        summaries
    }
}

/// How an object is governed, as the state keeps it.
pub(super) struct Governed {
    pub(super) judgement: Judgement,
    pub(super) policy: Option<Arc<PolicyKey>>,
    pub(super) dry_run: bool,
    /// The limits group of the governing policy, if it sets limits.
    pub(super) group: Option<CompactString>,
    /// The group's limits are new or changed: enforce them whatever changed in the object.
    pub(super) limits_changed: bool,
    /// The other policies of its scope that applied, and lost.
    pub(super) overruled: Vec<Arc<PolicyKey>>,
}

impl State {
    /// Judges a seen object under its own settings and the policies that may apply.
    pub(super) fn govern(
        &mut self,
        seen: &Seen<'_>,
        created: Option<Timestamp>,
        now: Timestamp,
    ) -> Governed {
        let empty = BTreeMap::new();
        let labels = seen.object.metadata.labels.as_ref().unwrap_or(&empty);
        let (keys, candidates) = self.candidates(&seen.namespace, seen.answers);
        let subject = Subject {
            entry: &self.kinds[seen.kind],
            object: seen.value,
            labels,
            namespace_labels: self.namespace_labels.get(&seen.namespace).unwrap_or(&empty),
            created,
        };
        let judgement = judge(&subject, &candidates, now);
        let Some(index) = judgement.policy else {
            return Governed {
                judgement,
                policy: None,
                dry_run: false,
                group: None,
                limits_changed: false,
                overruled: Vec::new(),
            };
        };
        let rules = candidates[index].rules;
        let key = keys[index].clone();
        let dry_run = rules.dry_run;
        let limits = Limits {
            succeeded: rules.succeeded_limit,
            failed: rules.failed_limit,
        };
        let group = (limits != Limits::default()).then(|| {
            let value = rules
                .group_by
                .as_ref()
                .and_then(|label| labels.get(label))
                .map_or("", String::as_str);
            CompactString::from(format!("{}{value}", policy_group_prefix(&key)))
        });
        let overruled = judgement
            .overruled
            .iter()
            .map(|&index| (*keys[index]).clone())
            .collect();
        let mut limits_changed = false;
        if let Some(group) = &group {
            let group_key = GroupKey {
                kind: seen.kind,
                namespace: seen.namespace.clone(),
                parent: group.clone(),
            };
            limits_changed = self.limits.insert(group_key, limits) != Some(limits);
        }
        Governed {
            judgement,
            policy: Some(key),
            dry_run,
            group,
            limits_changed,
            overruled,
        }
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
