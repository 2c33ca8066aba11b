//! Where the controller sends CloudEvents — a Cleaner's `cloudEventSink`, a policy's `spec.sink`,
//! the `--ledger-sink` — and the one way it does: the sink policy enforced at every connection
//! ([`guard`], configured by [`policy`]), binary-mode HTTP with retries ([`Sender`]).

mod delivery;
pub mod guard;
pub mod policy;

pub use delivery::{Delivery, Sender, Undelivered, event, request};
