//! Which policies an object is judged under, and by what names. A RetentionPolicy or
//! ClusterRetentionPolicy is read from its API object ([`PolicyObject`]: its [`PolicyKey`], its
//! checked [`Rules`]); the candidates for an object in a namespace are that namespace's valid
//! RetentionPolicies and every valid ClusterRetentionPolicy, in [`PolicyKey`] order
//! ([`candidates`]). The controller and `kubectl retention explain` both build their candidates
//! here, so they judge an object under the same policies in the same order.

use std::borrow::Borrow;
use std::fmt;

use kube::Resource;

use crate::annotations::APPROVED_GENERATION;
use crate::api::{ClusterRetentionPolicy, PolicyRules, PolicyStatus, RetentionPolicy};
use crate::field_error::FieldError;
use crate::governing::{Answers, CandidatePolicy};

use super::Rules;

/// A policy's name; `namespace` is `None` for a ClusterRetentionPolicy. Ordered as candidates
/// are judged: cluster policies, then namespaced ones, each by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyKey {
    pub namespace: Option<String>,
    pub name: String,
}

impl PolicyKey {
    /// Whether the policy may apply to objects of `namespace`: a RetentionPolicy of it, or any
    /// ClusterRetentionPolicy (whose `namespaceSelector` judging tells the rest).
    pub fn applies_in(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|own| own == namespace)
    }

    /// Which of the two kinds of policy it names.
    pub fn scope(&self) -> PolicyScope {
        match self.namespace {
            Some(_) => PolicyScope::Namespaced,
            None => PolicyScope::Cluster,
        }
    }
}

impl fmt::Display for PolicyKey {
    /// `RetentionPolicy team-a/jobs`, `ClusterRetentionPolicy jobs` — as users name them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "RetentionPolicy {namespace}/{}", self.name),
            None => write!(f, "ClusterRetentionPolicy {}", self.name),
        }
    }
}

/// RetentionPolicy or ClusterRetentionPolicy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyScope {
    Namespaced,
    Cluster,
}

/// A policy as the API serves it: what both kinds say alike is read here once.
pub trait PolicyObject: Resource {
    const SCOPE: PolicyScope;

    fn key(&self) -> PolicyKey {
        let meta = self.meta();
        PolicyKey {
            namespace: match Self::SCOPE {
                PolicyScope::Namespaced => Some(meta.namespace.clone().unwrap_or_default()),
                PolicyScope::Cluster => None,
            },
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }

    /// The generation approved past the blast-radius guard (its
    /// `retention.dev/approved-generation`).
    fn approved_generation(&self) -> Option<i64> {
        let annotations = self.meta().annotations.as_ref()?;
        super::approved_generation(annotations.get(APPROVED_GENERATION)?).ok()
    }

    /// The generation the controller accepted, as its status says.
    fn accepted_generation(&self) -> Option<i64> {
        self.policy_status()?.accepted_generation
    }

    fn policy_status(&self) -> Option<&PolicyStatus>;

    /// Its spec as written.
    fn spec(&self) -> &PolicyRules;

    /// What its rules are read from: its spec, and a ClusterRetentionPolicy's
    /// `namespaceSelector`.
    fn source(&self) -> RulesSource;

    /// Its spec read and checked ([`Rules::read`]), a ClusterRetentionPolicy's
    /// `namespaceSelector` included.
    fn rules(&self) -> (Rules, Vec<FieldError>) {
        self.source().read()
    }
}

/// What a policy's [`Rules`] are read from, owned: the controller reads it off its loops, on
/// the thread that takes each namespace's share of time, since compiling a policy's expressions
/// takes up to milliseconds each.
#[derive(Debug, Clone, Default)]
pub struct RulesSource {
    pub spec: PolicyRules,
    /// A ClusterRetentionPolicy's `namespaceSelector`, as JSON.
    pub namespace_selector: Option<serde_json::Value>,
}

impl RulesSource {
    /// The rules read and checked ([`Rules::read`]), with every error found.
    pub fn read(&self) -> (Rules, Vec<FieldError>) {
        Rules::read(&self.spec, self.namespace_selector.as_ref())
    }

    /// About how many bytes it holds: its spec's JSON text.
    pub fn bytes(&self) -> usize {
        serde_json::to_vec(&self.spec).map_or(0, |text| text.len())
            + self
                .namespace_selector
                .as_ref()
                .map_or(0, |selector| selector.to_string().len())
    }
}

impl PolicyObject for RetentionPolicy {
    const SCOPE: PolicyScope = PolicyScope::Namespaced;

    fn policy_status(&self) -> Option<&PolicyStatus> {
        self.status.as_ref()
    }

    fn spec(&self) -> &PolicyRules {
        &self.spec.rules
    }

    fn source(&self) -> RulesSource {
        RulesSource {
            spec: self.spec.rules.clone(),
            namespace_selector: None,
        }
    }
}

impl PolicyObject for ClusterRetentionPolicy {
    const SCOPE: PolicyScope = PolicyScope::Cluster;

    fn policy_status(&self) -> Option<&PolicyStatus> {
        self.status.as_ref()
    }

    fn spec(&self) -> &PolicyRules {
        &self.spec.rules
    }

    fn source(&self) -> RulesSource {
        let namespace_selector = self
            .spec
            .namespace_selector
            .as_ref()
            .and_then(|selector| serde_json::to_value(selector).ok());
        RulesSource {
            spec: self.spec.rules.clone(),
            namespace_selector,
        }
    }
}

/// The policies that may apply to an object of `namespace`, as [`crate::governing::judge`]
/// takes them, with their keys at the same indexes: of `policies` (in [`PolicyKey`] order, as a
/// `BTreeMap` holds them), those that apply in the namespace and are valid — `valid` answers a
/// policy's rules, `None` for an invalid one — with `answers` where its expressions were
/// evaluated ahead.
pub fn candidates<'a, K, P>(
    policies: impl IntoIterator<Item = (&'a K, &'a P)>,
    namespace: &str,
    valid: impl Fn(&'a P) -> Option<&'a Rules>,
    answers: impl Fn(&'a K) -> Option<&'a Answers>,
) -> (Vec<&'a K>, Vec<CandidatePolicy<'a>>)
where
    K: Borrow<PolicyKey> + 'a,
    P: 'a,
{
    let mut keys = Vec::new();
    let mut candidates = Vec::new();
    for (key, policy) in policies {
        let name: &PolicyKey = key.borrow();
        let Some(rules) = valid(policy).filter(|_| name.applies_in(namespace)) else {
            continue;
        };
        keys.push(key);
        candidates.push(CandidatePolicy {
            namespaced: name.namespace.is_some(),
            rules,
            answers: answers(key),
        });
    }
    (keys, candidates)
}
