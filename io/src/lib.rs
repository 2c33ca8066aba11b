//! kube-retention's traffic with the API server, apart from what it decides: the controller and
//! the Cleaners both read objects and send requests through here, so both share one list
//! discipline, one request budget and one circuit breaker.
//!
//! In: a [`watch_set`] starts and stops watches by key in supervised tasks, for the controller's
//! kinds ([`watches`]) and the Cleaners' targets alike, each beginning with the list
//! [`initial_list`] makes (streamed, or in pages where the API server refuses or cuts that),
//! lists taking turns across both ([`list_turns`]), each page of a paged list read within a byte
//! bound ([`page_bytes`]), objects decoded without `managedFields` ([`lean`]),
//! restarts backed off ([`watch_backoff`]), relists a tenant asks for coalesced per kind
//! ([`relist_throttle`]), and a list of one namespace never passing on an older version of what
//! its kind's watch told since (`namespace_lists`).
//!
//! Out: every write waits for the client-side [`budget`] (`--qps`); every DELETE asks the
//! [`breaker`] first, whose trips outlive the process in a ConfigMap; its answer is one of
//! [`deletion::Sent`]. Policies' and Cleaners' statuses go through the one writer,
//! [`status_writes`], which retries them.
//!
//! And the one [`clock`] every part reads, so a test on paused time drives all of them.

pub mod breaker;
pub mod budget;
pub mod clock;
pub mod deletion;
pub mod initial_list;
pub mod lean;
pub mod list_turns;
mod namespace_lists;
pub mod page_bytes;
pub mod relist_throttle;
pub mod status_writes;
pub mod watch_backoff;
pub mod watch_set;
pub mod watches;
