//! The sink policy enforced where the controller connects to a CloudEvent sink, so a tenant's
//! URL reaches nothing the admin did not allow, whatever DNS says:
//!
//! - [`Guarded`] judges the scheme and host as hyper itself read them from the URL: an IP
//!   literal never reaches a resolver (hyper connects to it directly), so it is judged here.
//! - [`Resolver`] judges every address a name resolves to and drops the refused ones; with none
//!   left the connection fails with the [`Refusal`] and no connection is attempted. It runs for
//!   every connection and caches nothing, and hyper connects to the very addresses it returned,
//!   so a name that resolves elsewhere later (DNS rebinding) is judged afresh, never trusted
//!   from an earlier verdict.
//!
//! Both judge by the policy in force when the connection is made ([`SharedPolicy::load`]), so
//! what the controller learns of the cluster meanwhile counts from its next connection on.
//!
//! Names are resolved by hickory-resolver ([`system_lookup`]), not the C library's
//! `getaddrinfo`: a sink's host name is a tenant's input, and `getaddrinfo` blocks a thread
//! (tokio's blocking pool) until the resolver's own timeouts end it — with the pod's search
//! domains, tens of seconds for a name whose nameserver never answers. The attempt's timeout
//! dropped the waiting future but not the thread, so a tenant whose sink named such a host left a
//! thread behind at every attempt, up to the pool's 512, which every other blocking task shares.
//! hickory's lookup is a future on the runtime: dropped with its attempt, it ends there, so the
//! lookups under way are the attempts under way (the ledger's lanes bound those, per namespace:
//! `kube_retention_sinks::ledger`) and none outlives its attempt. It reads the same
//! `/etc/resolv.conf` and `/etc/hosts` the C library would (NSS modules beyond those are not
//! consulted: a pod has none); its cache keeps answers for their TTL, which changes nothing here,
//! since every connection is judged by the addresses it is made to.
//!
//! Redirects are not followed: hyper's client hands a 3xx back like any other answer, and
//! delivery counts it as a failure.

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hickory_resolver::TokioResolver;
pub use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioIo;
use kube_retention_common::sink_policy::{Refusal, SinkPolicy};
use tokio::net::TcpStream;
use tower::Service;

use super::SharedPolicy;

pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Resolves a host name to addresses (the system's configuration; tests inject their own).
pub type Lookup =
    Arc<dyn Fn(String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> + Send + Sync>;

/// The system's resolver configuration — `/etc/resolv.conf` (its nameservers, search domains,
/// `ndots`, timeout and attempts, as the kubelet writes them for the pod) and `/etc/hosts` —
/// asked in the process ([`resolver_lookup`]). Without a readable configuration every name
/// fails to resolve, saying why; addresses written as such still connect.
pub fn system_lookup() -> Lookup {
    match hickory_resolver::system_conf::read_system_conf() {
        Ok((config, options)) => resolver_lookup(config, options),
        Err(error) => unresolving(format!("reading /etc/resolv.conf: {error}")),
    }
}

/// Names resolved by hickory-resolver as `config` and `options` say: a lookup is a future, and
/// the attempt's timeout that drops it ends it ([module docs](self)).
pub fn resolver_lookup(config: ResolverConfig, options: ResolverOpts) -> Lookup {
    let built = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(options)
        .build();
    let resolver = match built {
        Ok(resolver) => Arc::new(resolver),
        Err(error) => return unresolving(format!("building the resolver: {error}")),
    };
    Arc::new(move |name: String| {
        let resolver = resolver.clone();
        Box::pin(async move {
            let resolved = resolver
                .lookup_ip(name.as_str())
                .await
                .map_err(std::io::Error::other)?;
            Ok(resolved.iter().collect())
        })
    })
}

/// A lookup that fails every name with `why`: there is no resolver.
fn unresolving(why: String) -> Lookup {
    tracing::warn!(%why, "no DNS resolver: CloudEvent sinks named by host name cannot be resolved");
    let why: Arc<str> = Arc::from(why);
    Arc::new(move |name: String| {
        let error = std::io::Error::other(format!("resolving {name}: no DNS resolver: {why}"));
        Box::pin(std::future::ready(Err(error)))
    })
}

/// A resolver for hyper's [`HttpConnector`] that keeps only the addresses the policy allows.
#[derive(Clone)]
pub struct Resolver {
    policy: SharedPolicy,
    lookup: Lookup,
}

impl Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy.load();
        let name = name.as_str().to_owned();
        let lookup = (self.lookup)(name.clone());
        Box::pin(async move {
            let resolved = lookup
                .await
                .map_err(|error| format!("resolving {name}: {error}"))?;
            allowed(&policy, &name, resolved)
        })
    }
}

/// The addresses of `resolved` the policy allows for `name` (port 0: the connector sets the
/// URL's); the first refusal when it allows none.
fn allowed(
    policy: &SinkPolicy,
    name: &str,
    resolved: Vec<IpAddr>,
) -> Result<std::vec::IntoIter<SocketAddr>, BoxError> {
    let mut refusal = None;
    let mut allowed = Vec::new();
    for address in resolved {
        match policy.check_resolved(name, address) {
            Ok(()) => allowed.push(SocketAddr::new(address, 0)),
            Err(refused) => {
                refusal.get_or_insert(refused);
            }
        }
    }
    if allowed.is_empty() {
        return Err(match refusal {
            Some(refusal) => Box::new(refusal),
            None => format!("{name} resolved to no address").into(),
        });
    }
    Ok(allowed.into_iter())
}

/// hyper's TCP connector behind the sink policy: the URL judged, then the resolved addresses.
#[derive(Clone)]
pub struct Guarded {
    policy: SharedPolicy,
    http: HttpConnector<Resolver>,
}

impl Guarded {
    pub fn new(policy: SharedPolicy, lookup: Lookup) -> Self {
        let mut http = HttpConnector::new_with_resolver(Resolver {
            policy: policy.clone(),
            lookup,
        });
        // https URLs reach this connector too: TLS is layered over it.
        http.enforce_http(false);
        Self { policy, http }
    }
}

impl Service<Uri> for Guarded {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let scheme = uri.scheme_str().unwrap_or_default();
        let host = uri.host().unwrap_or_default();
        if let Err(refusal) = self.policy.load().check_parts(scheme, host) {
            return Box::pin(std::future::ready(Err(refusal.into())));
        }
        let connecting = self.http.call(uri);
        Box::pin(async move { connecting.await.map_err(Into::into) })
    }
}

/// The sink policy's refusal somewhere in `error`'s chain of sources, if it is one.
pub fn refusal<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Refusal> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refusal) = error.downcast_ref::<Refusal>() {
            return Some(refusal);
        }
        current = error.source();
    }
    None
}

/// `error` and its sources, for the debug log.
pub fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(source) = current {
        text.push_str(": ");
        text.push_str(&source.to_string());
        current = source.source();
    }
    text
}
