//! kube-retention's controller: deletes objects once their `retention.dev/expires-at` has
//! passed, stamps that annotation when a run finishes, and enforces count limits.
//!
//! - [`kinds`]: what is watched and how runs name their parents.
//! - [`state`]: compact records, limits and the deadline queue; pure decisions.
//! - [`executor`]: the API requests, within a client-side budget, deletions first.
//! - [`run`]: watches, timer and leadership wired to the two.

pub mod args;
pub mod executor;
pub mod kinds;
pub mod leader;
pub mod metrics;
pub mod run;
pub mod startup;
pub mod state;
pub mod watch_backoff;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
