//! The kube-retention model as pure functions, shared by the webhook and the controller so the
//! two can never disagree. The model itself arrives with the webhook issue; until then this crate
//! holds only the names both binaries agree on.

/// The annotation prefix every kube-retention annotation shares.
pub const ANNOTATION_PREFIX: &str = "retention.dev/";
