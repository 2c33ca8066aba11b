//! The circuit breaker's ConfigMap, as the controller writes it and `kubectl retention breaker`
//! reads and deletes it: its name beside the controller's Lease, and its keys. Said once here so
//! the two cannot name different objects.

/// The ConfigMap, in the controller's namespace, of the controller whose Lease is `lease_name`.
pub fn configmap_name(lease_name: &str) -> String {
    format!("{lease_name}-circuit-breaker")
}

/// When the breaker opened (RFC 3339).
pub const TRIPPED_AT: &str = "trippedAt";
/// The limit it went past: that many DELETEs...
pub const LIMIT: &str = "limit";
/// ...within this window (`10m`).
pub const WINDOW: &str = "window";
/// What happened and what to do, in a sentence.
pub const MESSAGE: &str = "message";
