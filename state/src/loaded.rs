//! A retention policy as the state loads it: its checked rules (shared with the evaluator), the
//! errors that keep it from deleting, its generation, and the generations the blast-radius guard
//! lets through. The book ([`super::policies`]) keeps them by name; the guard
//! ([`super::guard`]) reads them when a generation is armed.

use std::sync::Arc;

use kube_retention_common::FieldError;
use kube_retention_common::policies::Rules;

#[derive(Debug)]
pub struct LoadedPolicy {
    /// Shared with the evaluator, which runs its expressions off the loop.
    pub rules: Arc<Rules>,
    pub errors: Vec<FieldError>,
    pub generation: Option<i64>,
    pub approval: Approval,
}

/// The generations the blast-radius guard lets through, as the policy object says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Approval {
    /// Named by its `retention.dev/approved-generation` annotation.
    pub approved: Option<i64>,
    /// Accepted by the controller before, as its status says.
    pub accepted: Option<i64>,
}

impl LoadedPolicy {
    /// Its rules, where it is valid (an invalid policy governs nothing).
    pub fn valid_rules(&self) -> Option<&Rules> {
        self.errors.is_empty().then_some(&*self.rules)
    }
}
