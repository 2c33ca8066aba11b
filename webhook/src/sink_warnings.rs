//! What admission tells whoever applies a Cleaner whose CloudEvent sink the sink policy refuses
//! (`kube_retention_common::sink_policy`, configured like the controller's): a warning, not a
//! denial. Only what the URL itself shows is judged — the scheme, an address in any spelling,
//! a name the allow list leaves out: a name's addresses are the controller's to judge when it
//! connects, since DNS may answer differently by then. A scheme other than http(s) stays a
//! denial (`kube_retention_common::cleaner::errors`).

use kube_retention_common::sink_policy::SinkPolicy;
use serde_json::Value;

/// The warnings for `cleaner`'s `spec.cloudEventSink`, if it has one the policy refuses.
pub fn of(policy: &SinkPolicy, cleaner: &Value) -> Vec<String> {
    let Some(sink) = cleaner
        .pointer("/spec/cloudEventSink")
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    match policy.check_url(sink) {
        Ok(_) => Vec::new(),
        Err(refusal) => vec![format!(
            "spec.cloudEventSink: {}: {}: refused by the sink policy; the controller will not deliver to it",
            Value::String(sink.to_owned()),
            refusal.what()
        )],
    }
}
