//! kube-retention's controller: deletes objects once their `retention.dev/expires-at` has
//! passed, stamps that annotation when a run finishes, and enforces count limits.
//!
//! - [`kinds`]: what is watched and how runs name their parents.
//! - [`state`]: compact records, limits and the deadline queue; pure decisions.
//! - [`executor`]: the API requests, within a client-side budget, deletions first.
//! - [`evaluator`]: retention policies' CEL, on a thread of its own, fair between namespaces.
//! - [`run`]: watches, timer and leadership wired to the two; [`watches`] starts and stops them
//!   per kind; [`discovery`] finds annotated kinds beyond the configured ones.
//! - [`cleaners`]: Cleaners, groups deleted together when their conditions hold.
//! - [`app`]: everything put together behind `Args::run`, every background task supervised.

pub mod app;
pub mod args;
pub mod cleaners;
pub mod crds;
pub mod discovery;
pub mod evaluator;
pub mod executor;
pub mod fair;
pub mod kinds;
pub mod leader;
pub mod metrics;
pub mod policy_status;
pub mod relist_throttle;
pub mod run;
pub mod startup;
pub mod state;
pub mod watch_backoff;
pub mod watches;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    ExtraKind(#[from] kube_retention_common::kinds::ExtraKindError),
    #[error("--kind {spec:?}: {source}")]
    DuplicateKind {
        spec: String,
        source: kube_retention_common::kinds::RegistryError,
    },
    #[error("--disable-kind: {0}")]
    DisableKind(#[source] kube_retention_common::kinds::RegistryError),
    #[error("{0} is not served by this cluster")]
    NotServed(String),
    #[error(
        "missing RBAC permissions, grant them (see deploy/core/controller-rbac.yaml): {}",
        .0.join("; ")
    )]
    MissingPermissions(Vec<String>),
    #[error(transparent)]
    SinkPolicy(#[from] kube_retention_common::sink_policy::FlagError),
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    TaskEnded(#[from] kube_retention_cli::supervise::Ended),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
