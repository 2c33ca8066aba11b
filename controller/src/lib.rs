//! kube-retention's controller: deletes objects once their `retention.dev/expires-at` has
//! passed, stamps that annotation when a run finishes, and enforces count limits. It is built on
//! crates of its own: the pure decisions ([`kube_retention_state`]), tenants' CEL off the loops
//! ([`kube_retention_evaluator`]), the traffic with the API server — lists, watches, the
//! request budget, the circuit breaker and the clock ([`kube_retention_io`]) — and where
//! CloudEvents may go, with the deletion ledger that sends them ([`kube_retention_sinks`]).
//!
//! - [`run`]: the loop: watches, timer and leadership wired to the state and the evaluator;
//!   [`discovery`] finds annotated kinds beyond the configured ones.
//! - [`executor`]: the state's decisions as API requests, within the budget, deletions first.
//! - [`policy_status`]: what the state learns of each policy, written to its status.
//! - Cleaners ([`kube_retention_cleaners`], a crate of their own): groups deleted together when
//!   their conditions hold, started by [`app`] with `--cleaners` on the same budget, breaker,
//!   evaluator and Lease.
//! - [`app`]: everything put together: [`Controller::build`] from a [`Config`], every
//!   background task supervised, and `Args::run` making both from the flags.

pub mod admission_policy;
pub mod app;
pub mod args;
pub mod config;
pub mod crds;
pub mod discovery;
mod error;
pub mod executor;
pub mod leader;
pub mod metrics;
pub mod policy_status;
pub mod run;
pub mod startup;

pub use app::Controller;
pub use config::Config;
pub use error::{Error, Result};

/// The controller's name: its binary, its Events' reporter, its default Lease and identity.
pub const NAME: &str = "kube-retention-controller";

/// The hidden subcommand that runs the CEL evaluator process the controller starts itself.
pub const EVALUATE: &str = "evaluate";
