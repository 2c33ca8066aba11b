//! kube-retention's controller: deletes objects once their `retention.dev/expires-at` has
//! passed, stamps that annotation when a run finishes, and enforces count limits.
//!
//! - [`kube_retention_state`] (its own crate): compact records, limits and the deadline queue; pure decisions.
//! - [`executor`]: the API requests, within a client-side budget, deletions first.
//! - [`kube_retention_evaluator`] (its own crate): retention policies' CEL, on a thread of its own, fair between namespaces.
//! - [`run`]: watches, timer and leadership wired to the two; [`watches`] starts and stops them
//!   per kind, each listing as [`initial_list`] says; [`discovery`] finds annotated kinds beyond
//!   the configured ones.
//! - [`cleaners`]: Cleaners, groups deleted together when their conditions hold.
//! - [`ledger`]: each deletion announced as a CloudEvent (and, with `archiveBeforeDelete`,
//!   acknowledged first); [`sinks`]: where CloudEvents may go and how they are sent.
//! - [`app`]: everything put together behind `Args::run`, every background task supervised.

pub mod app;
pub mod args;
pub mod breaker;
pub mod cleaners;
pub mod clock;
pub mod crds;
pub mod discovery;
mod error;
pub mod executor;
pub mod initial_list;
pub mod leader;
pub mod lean;
pub mod ledger;
pub mod list_turns;
pub mod metrics;
pub mod policy_status;
pub mod relist_throttle;
pub mod run;
pub mod sinks;
pub mod startup;
pub mod watch_backoff;
pub mod watches;

pub use error::{Error, Result};
