//! What can go wrong, typed so that an operator can tell a forbidden list from a failed delete.

/// A pruner's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing {kind}: {source}")]
    List {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {kind} {object}: {source}")]
    Delete {
        kind: String,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "no strategy: add Strategy::Limits, NewestFinished, MaxAge or Custom, or nothing would \
         ever be pruned"
    )]
    NoStrategy,
}

impl Error {
    /// A short label for metrics (`list`, `delete`, `no_strategy`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::List { .. } => "list",
            Self::Delete { .. } => "delete",
            Self::NoStrategy => "no_strategy",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
