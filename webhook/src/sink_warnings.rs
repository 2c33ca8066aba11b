//! What admission tells whoever applies a Cleaner (`spec.cloudEventSink`) or a retention policy
//! (`spec.sink`, the deletion ledger's) whose CloudEvent sink the sink policy refuses
//! (`kube_retention_common::sink_policy`, configured like the controller's): a warning, not a
//! denial. Only what the URL itself shows is judged — the scheme, an address in any spelling,
//! a name the allow list leaves out, the clouds' metadata services by address and by name (the
//! sink policy's one table, `sink_policy::metadata`): a name's addresses are the controller's
//! to judge when it connects, since DNS may answer differently by then. Nor does admission know
//! what the controller learns of the cluster at run time — its service and pod CIDRs, node
//! addresses and API server endpoints (`sinks/src/cluster/`): a sink there is
//! admitted without a warning and refused when the controller connects, its Event naming why.
//! A scheme other than http(s) stays a denial (`kube_retention_common::cleaner::errors`).

use kube_retention_common::sink_policy::SinkPolicy;
use serde_json::Value;

/// The warnings for `cleaner`'s `spec.cloudEventSink`, if it has one the policy refuses.
pub fn of(policy: &SinkPolicy, cleaner: &Value) -> Vec<String> {
    at(policy, cleaner, "cloudEventSink")
}

/// The warnings for a retention policy's `spec.sink`, if it has one the policy refuses.
pub fn of_policy(policy: &SinkPolicy, retention_policy: &Value) -> Vec<String> {
    at(policy, retention_policy, "sink")
}

fn at(policy: &SinkPolicy, object: &Value, field: &str) -> Vec<String> {
    let Some(sink) = object
        .get("spec")
        .and_then(|spec| spec.get(field))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    match policy.check_url(sink) {
        Ok(_) => Vec::new(),
        Err(refusal) => vec![format!(
            "spec.{field}: {}: {}: refused by the sink policy; the controller will not deliver to it",
            Value::String(sink.to_owned()),
            refusal.what()
        )],
    }
}
