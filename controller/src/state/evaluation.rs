//! Which policies may apply in a namespace, and their expressions evaluated ahead, off the
//! loop: which of an object's policies need their
//! `match` or `finished` evaluated before it can be judged ([`State::unevaluated`]), the
//! answers they come back with ([`PolicyAnswers`]), and the objects on which a policy's
//! expressions went past their cost or time limit — in its status until they change or go.

use kube_retention_common::governing::{Answers, Selected, selects};
use kube_retention_common::policies::Rules;

use super::policies::PolicyKey;
use super::*;

/// Each policy's answers for one object.
pub type PolicyAnswers = HashMap<Arc<PolicyKey>, Answers>;

/// The policies whose expressions must be evaluated on an object before it is judged.
pub type Unevaluated = Vec<(Arc<PolicyKey>, Arc<Rules>)>;

impl State {
    /// The valid policies that may apply in `namespace`, in [`PolicyKey`] order.
    pub(super) fn valid_in<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a Arc<PolicyKey>, &'a LoadedPolicy)> {
        self.policies.iter().filter(move |(key, loaded)| {
            key.applies_in(namespace) && loaded.valid_rules().is_some()
        })
    }

    /// The valid policies that select `object` (of `kind`) and have expressions to evaluate on
    /// it; empty where the object can be judged at once.
    pub fn unevaluated(&self, kind: KindId, object: &DynamicObject) -> Unevaluated {
        let entry = &self.kinds[kind];
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
            namespace_labels: self.namespace_labels.get(namespace).unwrap_or(&empty),
        };
        self.valid_in(namespace)
            .filter(|(key, loaded)| {
                loaded.rules.has_expressions()
                    && selects(&loaded.rules, key.namespace.is_some(), &selected)
            })
            .map(|(key, loaded)| (key.clone(), loaded.rules.clone()))
            .collect()
    }

    /// Whether `answers` answer exactly `policies` as they are now (a policy changed while its
    /// expressions were evaluated is evaluated again).
    pub fn answers_current(&self, policies: &Unevaluated, answered: &Unevaluated) -> bool {
        policies.len() == answered.len()
            && policies
                .iter()
                .zip(answered)
                .all(|((key, rules), (was, then))| key == was && Arc::ptr_eq(rules, then))
    }

    /// An object whose evaluation is under way was listed again: its record stays through the
    /// relist's end.
    pub fn listed(&mut self, kind: KindId, namespace: &str, name: &str) {
        let key = ObjectKey {
            kind,
            namespace: self.intern(namespace),
            name: name.into(),
        };
        if let Some(record) = self.runs.get_mut(&key) {
            record.listed = true;
        }
    }

    /// Which policies' expressions went past a limit on `key`, from its latest answers (none,
    /// where it was judged without evaluating any).
    pub(super) fn note_exceeded(&mut self, key: &ObjectKey, answers: Option<&PolicyAnswers>) {
        for objects in self.exceeded.values_mut() {
            objects.remove(key);
        }
        for (policy, answers) in answers.into_iter().flatten() {
            let exceeded: Vec<String> = answers
                .exceeded()
                .into_iter()
                .map(|(path, error)| format!("{path}: {error}"))
                .collect();
            if !exceeded.is_empty() {
                self.exceeded
                    .entry(policy.clone())
                    .or_default()
                    .insert(key.clone(), exceeded.join("; "));
            }
        }
        self.exceeded.retain(|_, objects| !objects.is_empty());
    }
}
