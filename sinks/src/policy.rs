//! The controller's sink policy at start: the admin's three `--cloud-event-sink-*` flags, plus
//! what only the controller knows to deny — the addresses of the API server it talks to (from
//! its client configuration, resolved at start) and its own pod IP (`POD_IP`). The rules
//! themselves are `kube_retention_common::sink_policy`'s; what the cluster says of its insides
//! is added as it changes by [`super::cluster`].

use std::net::IpAddr;

use http::Uri;
use kube_retention_common::sink_policy::{FlagError, SinkPolicy};
use kube_retention_runtime::SinkPolicyFlags;

/// The policy of the admin's `flags`, with the API server at `api_server` (where the client's
/// configuration names one) and this pod (`pod_ip`) denied too.
pub async fn sink_policy(
    flags: &SinkPolicyFlags,
    pod_ip: Option<IpAddr>,
    api_server: Option<&Uri>,
) -> Result<SinkPolicy, FlagError> {
    let mut policy: SinkPolicy = flags.policy()?;
    if let Some(url) = api_server {
        for address in api_server_addresses(url).await {
            policy.deny_address(address, "the API server's address");
        }
    }
    if let Some(address) = pod_ip {
        policy.deny_address(address, "this controller's own address");
    }
    tracing::info!(?policy, "CloudEvent sink policy");
    Ok(policy)
}

/// The API server's address in `url`, or those its name resolves to now. A name that does not
/// resolve is logged, not fatal: the client reaching the API server will say more.
pub async fn api_server_addresses(url: &Uri) -> Vec<IpAddr> {
    match kube_retention_runtime::sinks::addresses_of(url).await {
        Some(Ok(addresses)) => addresses,
        Some(Err(error)) => {
            let host = url.host().unwrap_or_default();
            tracing::warn!(%error, host, "resolving the API server's name for the sink policy: its addresses are not denied");
            Vec::new()
        }
        None => Vec::new(),
    }
}
