//! Sending CloudEvents to sinks, for every binary that does: the sink policy enforced at every
//! connection ([`guard`]), binary-mode HTTP with retries ([`Sender`]). The controller sends a
//! Cleaner's announcement and the deletion ledger's events through it, under the admin's
//! policy; `kubectl retention prune --ledger-sink` sends the ledger's events from the user's
//! own machine.

mod delivery;
pub mod guard;

pub use delivery::{Delivery, LedgerEventError, Sender, Undelivered, event, ledger_event, request};
