//! The deletion ledger's CloudEvents: what kube-retention says of each object it deletes
//! (`dev.retention.deleted`) and of each it is about to (`dev.retention.expiring`), to a
//! policy's `spec.sink` and to the controller's `--ledger-sink`. One type for the event's data,
//! so the controller, the e2e tests and any consumer read the same fields.
//!
//! With a policy's `archiveBeforeDelete`, the `deleted` event is sent, and must be acknowledged,
//! before the DELETE, and carries the object's final state: the object whole up to
//! [`ARCHIVED_OBJECT_LIMIT`] bytes of JSON, else its metadata only with `objectTruncated`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::duration;
use crate::expiry::Decider;
use crate::own_settings::TtlSource;
use crate::progress::Outcome;

/// A deletion, announced (after it, or before it with `archiveBeforeDelete`).
pub const DELETED: &str = "dev.retention.deleted";
/// A notice: the object goes at `deadline` (`notifyBefore`).
pub const EXPIRING: &str = "dev.retention.expiring";
/// The largest object an archive event carries whole, in bytes of JSON.
pub const ARCHIVED_OBJECT_LIMIT: usize = 256 * 1024;

/// The data of a ledger event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `ttl` (a deadline passed) or `limit` (over a count limit), `cleaner` (a Cleaner's
    /// group); for `expiring`, `ttl`.
    pub reason: String,
    /// Who decided: `RetentionPolicy team-a/jobs`, `ClusterRetentionPolicy jobs`, `its own
    /// settings`, `Cleaner team-a/old-preview`.
    pub decided_by: String,
    /// The setting that decided and its value, where one did: `ttlAfterSucceeded: 2h`,
    /// `annotation retention.dev/ttl: 30m`, `expires-at: 2026-12-31T23:00:00Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// When it was deleted (or, for `expiring`, when the notice went).
    pub time: Timestamp,
    /// The object's final state (`archiveBeforeDelete` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// `object` is the metadata only: the whole was over [`ARCHIVED_OBJECT_LIMIT`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub object_truncated: bool,
}

impl Entry {
    /// Carries `object` as its final state, whole if it fits, else its metadata.
    pub fn with_object(mut self, object: &Value) -> Self {
        let size = serde_json::to_vec(object).map_or(usize::MAX, |bytes| bytes.len());
        if size <= ARCHIVED_OBJECT_LIMIT {
            self.object = Some(object.clone());
        } else {
            let metadata = object.get("metadata").cloned().unwrap_or(Value::Null);
            self.object = Some(serde_json::json!({
                "apiVersion": object.get("apiVersion"),
                "kind": object.get("kind"),
                "metadata": metadata,
            }));
            self.object_truncated = true;
        }
        self
    }
}

/// A [`Decider`] in words, as the ledger names it: the policy field (`by_policy`) or the
/// object's own setting, and its value.
pub fn setting(decider: Decider, by_policy: bool) -> Option<String> {
    let after = |outcome: Outcome| match outcome {
        Outcome::Succeeded => "ttlAfterSucceeded",
        Outcome::Failed => "ttlAfterFailed",
    };
    Some(match decider {
        Decider::Keep => return None,
        Decider::ExpiresAt(at) => format!("annotation retention.dev/expires-at: {at}"),
        Decider::Ttl(ttl) if by_policy => format!("ttl: {}", duration::format(ttl)),
        Decider::Ttl(ttl) => format!("annotation retention.dev/ttl: {}", duration::format(ttl)),
        Decider::AfterFinish { outcome, ttl, .. } if by_policy => {
            format!("{}: {}", after(outcome), duration::format(ttl))
        }
        Decider::AfterFinish {
            outcome,
            source,
            ttl,
        } => match source {
            TtlSource::Annotation(key) => format!("annotation {key}: {}", duration::format(ttl)),
            TtlSource::Own => format!("its own {}: {}", after(outcome), duration::format(ttl)),
            TtlSource::Inherited => {
                format!("inherited {}: {}", after(outcome), duration::format(ttl))
            }
        },
    })
}
