//! The controller's errors: each says which operation failed and on what (the flag, the kind,
//! the permission, the address), with the underlying error as its source, so that a controller
//! that stops at start-up says exactly what to fix. [`Error::metric_label`] names the variant
//! for logs and metrics.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kinds(#[from] kube_retention_common::kinds::SelectionError),
    #[error(transparent)]
    SinkPolicy(#[from] kube_retention_common::sink_policy::FlagError),
    #[error("--ledger-sink {sink:?} is refused by the sink policy: {rule}")]
    LedgerSink { sink: String, rule: String },
    #[error("reading the Kubernetes client configuration (--kubeconfig, else in-cluster): {0}")]
    ClientConfig(#[source] kube::Error),
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("{0} is not served by this cluster")]
    NotServed(String),
    #[error("discovering the resources the API server serves for {api_version}: {source}")]
    Discovery {
        api_version: String,
        source: kube::Error,
    },
    #[error("asking the API server whether this controller may {permission}: {source}")]
    AccessReview {
        permission: String,
        source: kube::Error,
    },
    #[error(
        "missing RBAC permissions, grant them (see deploy/core/controller-rbac.yaml): {}",
        .0.join("; ")
    )]
    MissingPermissions(Vec<String>),
    #[error("serving metrics on {address}: {source}")]
    MetricsAddress {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("starting the CEL evaluator's thread: {0}")]
    Evaluator(#[source] std::io::Error),
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    TaskEnded(#[from] kube_retention_runtime::supervise::Ended),
}

impl Error {
    /// The variant's name, for a log field or a metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kinds(_) => "kinds",
            Self::SinkPolicy(_) => "sink_policy",
            Self::LedgerSink { .. } => "ledger_sink",
            Self::ClientConfig(_) => "client_config",
            Self::Client(_) => "client",
            Self::NotServed(_) => "not_served",
            Self::Discovery { .. } => "discovery",
            Self::AccessReview { .. } => "access_review",
            Self::MissingPermissions(_) => "missing_permissions",
            Self::MetricsAddress { .. } => "metrics_address",
            Self::Evaluator(_) => "evaluator",
            Self::Kube(_) => "kube",
            Self::TaskEnded(_) => "task_ended",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
