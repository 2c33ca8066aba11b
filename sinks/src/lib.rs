//! Where the controller sends CloudEvents — a Cleaner's `cloudEventSink`, a policy's `spec.sink`,
//! the `--ledger-sink` — and the one way it does: `kube_retention_runtime::sinks` (the sink
//! policy at every connection, delivery with retries), under the policy [`policy`] builds from
//! the admin's flags and what only the controller knows of itself, with the cluster's insides
//! that [`cluster`] learns from the API denied too, as they change. The deletion [`ledger`] is
//! what sends them: each deletion announced, from bounded lanes fair between namespaces and
//! sinks (a Cleaner's CloudEvent goes the same way), and with `archiveBeforeDelete`
//! acknowledged before the DELETE.

pub mod cluster;
pub mod ledger;
pub mod metrics;
pub mod policy;

pub use kube_retention_runtime::sinks::{
    Attempted, Delivery, Sender, SharedPolicy, Undelivered, event, guard, ledger_event, request,
};
