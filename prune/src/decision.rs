//! Why an object is pruned or kept: what a strategy chose, or why none could — said once, for
//! the plan the strategies make and the report that shows it.

use kube_retention_common::progress::Outcome;
use serde::{Serialize, Serializer};

/// Why an object is pruned or kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum Decision {
    /// Beyond the controller's count limit of its outcome ([`Strategy::Limits`](crate::Strategy::Limits)): older, by
    /// creation, than the newest `limit` objects of that outcome.
    Limits {
        #[serde(serialize_with = "outcome_name")]
        outcome: Outcome,
        limit: u32,
    },
    /// Beyond the newest `limit` finished objects by finish time, across outcomes
    /// ([`Strategy::NewestFinished`](crate::Strategy::NewestFinished)).
    NewestFinished {
        limit: usize,
    },
    /// Finished longer ago than `limit` (Go-style duration text).
    MaxAge {
        limit: String,
    },
    Custom {
        strategy: String,
    },
    /// Within every limit.
    Kept,
    /// Not finished: never pruned.
    Running,
    /// Not a run-to-completion object by its kind's rule.
    NotARun,
    /// Annotated `retention.dev/keep: "true"`.
    KeepAnnotation,
    /// Already being deleted (`deletionTimestamp` set): neither counted nor pruned again.
    Deleting,
    /// The hook said no.
    Vetoed {
        reason: String,
    },
}

impl Decision {
    pub fn prunes(&self) -> bool {
        matches!(
            self,
            Self::Limits { .. }
                | Self::NewestFinished { .. }
                | Self::MaxAge { .. }
                | Self::Custom { .. }
        )
    }
}

/// `succeeded` or `failed`, as the policies' `succeededLimit` and `failedLimit` say it.
fn outcome_name<S: Serializer>(outcome: &Outcome, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
    })
}
