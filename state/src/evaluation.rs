//! Policies' expressions evaluated ahead, off the loop: which of an object's policies need their
//! `match` or `finished` evaluated before it can be judged ([`Unevaluated`], as the book
//! answers it), the answers they
//! come back with ([`PolicyAnswers`]), and the objects on which a policy's expressions went past
//! their cost or time limit ([`Exceeded`]) — in its status until they change or go.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_retention_common::cel::Exceeded as Limit;
use kube_retention_common::governing::Answers;
use kube_retention_common::policies::{PolicyKey, Rules};

use super::keys::ObjectKey;

/// Each policy's answers for one object.
pub type PolicyAnswers = HashMap<Arc<PolicyKey>, Answers>;

/// The policies whose expressions must be evaluated on an object before it is judged.
pub type Unevaluated = Vec<(Arc<PolicyKey>, Arc<Rules>)>;

/// Whether `answered` answers exactly `policies` as they are now (a policy changed while its
/// expressions were evaluated is evaluated again).
pub fn answers_current(policies: &Unevaluated, answered: &Unevaluated) -> bool {
    policies.len() == answered.len()
        && policies
            .iter()
            .zip(answered)
            .all(|((key, rules), (was, then))| key == was && Arc::ptr_eq(rules, then))
}

/// What a policy's expressions went past on one object, and how it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overran {
    /// The field paths and errors, as the status says them.
    pub how: String,
    /// Whether a bound of the evaluator's process was among them (not just the meter's).
    pub process: bool,
}

/// A policy's objects on which its expressions went past a limit: how many, and the first by
/// name with how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceededReport {
    pub count: usize,
    pub first: ObjectKey,
    pub overran: Overran,
}

/// Per policy, the objects on which its expressions went past a limit, and how.
#[derive(Debug, Default)]
pub(super) struct Exceeded(HashMap<Arc<PolicyKey>, BTreeMap<ObjectKey, Overran>>);

impl Exceeded {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Which policies' expressions went past a limit on `key`, from its latest answers (none,
    /// where it was judged without evaluating any, or is gone).
    pub(super) fn note(&mut self, key: &ObjectKey, answers: Option<&PolicyAnswers>) {
        for objects in self.0.values_mut() {
            objects.remove(key);
        }
        for (policy, answers) in answers.into_iter().flatten() {
            let exceeded = answers.exceeded();
            if exceeded.is_empty() {
                continue;
            }
            let process = exceeded
                .iter()
                .any(|(_, error)| matches!(error.exceeded(), Some(Limit::Process(_))));
            let how: Vec<String> = exceeded
                .into_iter()
                .map(|(path, error)| format!("{path}: {error}"))
                .collect();
            let overran = Overran {
                how: how.join("; "),
                process,
            };
            self.0
                .entry(policy.clone())
                .or_default()
                .insert(key.clone(), overran);
        }
        self.0.retain(|_, objects| !objects.is_empty());
    }

    pub(super) fn forget_policy(&mut self, policy: &PolicyKey) {
        self.0.remove(policy);
    }

    /// Per policy: how many objects, and the first by name with what went wrong.
    pub(super) fn first_each(&self) -> impl Iterator<Item = (&Arc<PolicyKey>, ExceededReport)> {
        self.0.iter().filter_map(|(policy, objects)| {
            let (first, overran) = objects.first_key_value()?;
            let report = ExceededReport {
                count: objects.len(),
                first: first.clone(),
                overran: overran.clone(),
            };
            Some((policy, report))
        })
    }
}
