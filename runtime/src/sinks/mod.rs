//! Sending CloudEvents to sinks, for every binary that does: the sink policy enforced at every
//! connection ([`guard`]), by the policy in force then ([`SharedPolicy`], which the controller
//! swaps as it learns the cluster), binary-mode HTTP with retries ([`Sender`]). The controller sends a
//! Cleaner's announcement and the deletion ledger's events through it, under the admin's
//! policy; `kubectl retention prune --ledger-sink` sends the ledger's events from the user's
//! own machine.

mod delivery;
pub mod guard;
mod shared;

pub use delivery::{
    Attempted, Delivery, LedgerEventError, Sender, Undelivered, event, ledger_event, request,
};
pub use shared::{Publisher, SharedPolicy, shared};

/// The addresses `url`'s host stands for now: the address itself, or those its name resolves to
/// (sorted, without repeats). `None` where the URL names no host.
pub async fn addresses_of(url: &http::Uri) -> Option<std::io::Result<Vec<std::net::IpAddr>>> {
    let host = url.host()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(address) = bare.parse::<std::net::IpAddr>() {
        return Some(Ok(vec![address]));
    }
    let port = url.port_u16().unwrap_or(443);
    Some(tokio::net::lookup_host((bare, port)).await.map(|resolved| {
        let mut addresses: Vec<std::net::IpAddr> = resolved.map(|address| address.ip()).collect();
        addresses.sort();
        addresses.dedup();
        addresses
    }))
}
