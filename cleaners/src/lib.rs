//! Cleaners: groups of resources — objects named or selected by labels, a Helm release —
//! deleted together once a Cleaner's TTL has passed and its CEL conditions hold, announced with
//! a CloudEvent. RetentionPolicies judge objects one by one; a Cleaner judges a group at once.
//!
//! - [`book`]: Cleaners, their targets' objects and schedule; pure, clock-injected decisions.
//! - [`compile`] and [`judging`]: a Cleaner's spec compiled and its conditions judged on the
//!   evaluator, with every tenant's other CEL.
//! - [`targets`]: which objects a target selects; [`status`]: what a Cleaner reports.
//! - [`act`]: the clean itself, its CloudEvent sent through [`kube_retention_sinks`]; a Helm
//!   release read and uninstalled by [`kube_retention_helm`], only objects Helm's annotations
//!   give to it, each DELETE through [`deleting`].
//! - [`run`]: the watches, timer and leadership wired to the book.

pub mod act;
pub mod book;
pub mod compile;
pub mod deleting;
pub mod judging;
pub mod metrics;
pub mod run;
pub mod status;
pub mod targets;

pub use run::Cleaners;
