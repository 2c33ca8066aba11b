//! The circuit breakers' ConfigMaps, as the controller writes them and `kubectl retention
//! breaker` reads and changes them: their names beside the controller's Lease, and their keys.
//! Said once here so the two cannot name different objects.
//!
//! - The cluster's breaker: `<lease>-circuit-breaker` exists while it is open, its keys say the
//!   trip ([`TRIPPED_AT`], [`LIMIT`], [`WINDOW`], [`MESSAGE`]); releasing is deleting it.
//! - The namespaces' breakers: `<lease>-circuit-breaker-namespaces` has a key per namespace whose
//!   breaker is open, the namespace's name (a DNS label, so a valid key), its value the trip as
//!   JSON ([`NamespaceTrip`]); releasing one is removing its key, releasing all deleting it.
//!   At most [`MAX_OPEN_NAMESPACES`] keys, so it stays far within a ConfigMap's 1 MiB.

use serde::{Deserialize, Serialize};

/// The cluster breaker's ConfigMap, in the controller's namespace, of the controller whose Lease
/// is `lease_name`.
pub fn configmap_name(lease_name: &str) -> String {
    format!("{lease_name}-circuit-breaker")
}

/// The namespaces' breakers' ConfigMap, beside the cluster's.
pub fn namespaces_configmap_name(lease_name: &str) -> String {
    format!("{lease_name}-circuit-breaker-namespaces")
}

/// When the breaker opened (RFC 3339).
pub const TRIPPED_AT: &str = "trippedAt";
/// The limit it went past: that many DELETEs...
pub const LIMIT: &str = "limit";
/// ...within this window (`10m`).
pub const WINDOW: &str = "window";
/// What happened and what to do, in a sentence.
pub const MESSAGE: &str = "message";
/// Present, as [`CAUSE_NAMESPACES`], where the cluster's breaker opened because too many
/// namespaces' were open already ([`MAX_OPEN_NAMESPACES`]) rather than on its own count.
pub const CAUSE: &str = "cause";
/// The value of [`CAUSE`] for that.
pub const CAUSE_NAMESPACES: &str = "namespaces";

/// Namespaces whose breakers may be open at once: one more past its limit opens the cluster's
/// breaker instead. A key of at most 63 bytes and a value of about 70 each: about 550 KB.
pub const MAX_OPEN_NAMESPACES: usize = 4096;

/// A namespace's trip, the value of its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceTrip {
    /// When it opened (RFC 3339).
    pub tripped_at: String,
    /// More DELETEs in the namespace than this...
    pub limit: u32,
    /// ...within this window (`10m`).
    pub window: String,
}

impl NamespaceTrip {
    /// The value stored under the namespace's key.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The trip a value records; `None` when it is not one (written by hand).
    pub fn decode(value: &str) -> Option<Self> {
        serde_json::from_str(value).ok()
    }
}
