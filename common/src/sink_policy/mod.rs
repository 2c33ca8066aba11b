//! Where a Cleaner's CloudEvent may be sent: the sink policy, as pure functions.
//!
//! A namespace editor writes `spec.cloudEventSink`; the controller, one for every namespace,
//! connects to it from its own network position. Unchecked, that lets a tenant make the
//! controller POST to its loopback, to the cloud metadata service (169.254.169.254), to the API
//! server or to any in-cluster service, and read the outcome back from an Event. This module
//! owns the verdict — which schemes, addresses and names the controller may reach — and nothing
//! else: the controller enforces it when it connects (after DNS resolution, on every
//! connection), the webhook warns with it at admission, and the admin configures it with
//! `--cloud-event-sink-schemes`, `--cloud-event-sink-allow` and `--cloud-event-sink-deny`.
//!
//! - **Schemes**: `https` and `http` unless told otherwise.
//! - **Denied by default**: loopback (127.0.0.0/8, ::1), unspecified (0.0.0.0/8 — Linux connects
//!   0.x to the local host — and ::), link-local (169.254.0.0/16 and fe80::/10), multicast
//!   (224.0.0.0/4, ff00::/8), the broadcast address, `localhost` by name, and every cloud's
//!   metadata and platform services by address and by name (the one table: [`metadata`]:
//!   `169.254.169.254`, `fd00:ec2::254`, `168.63.129.16`, `100.100.100.200`,
//!   `metadata.google.internal`…); plus whatever the caller denies: the admin's ranges, and what
//!   the controller learns of the cluster ([`Learned`]: its service and pod CIDRs, node
//!   addresses and API server endpoints), the API server's address, the controller's own.
//! - **IPv6 forms of IPv4 addresses** are judged as the IPv4 address they stand for: mapped
//!   (`::ffff:127.0.0.1`), compatible (`::127.0.0.1`), NAT64's well-known prefix
//!   (`64:ff9b::/96`: a NAT64 gateway connects to the embedded address) and 6to4
//!   (`2002::/16`). Not Teredo (its embedded address is the client's, obfuscated) nor NAT64
//!   local-use prefixes (RFC 8215; where the address sits depends on the operator's prefix
//!   length): deny those with `--cloud-event-sink-deny` where a network uses them.
//! - **Allow list**: CIDRs, exact host names and `*.suffix` patterns. Empty, everything not
//!   denied is allowed; otherwise only what it covers. The most specific rule covering an
//!   address wins, and an allow rule as specific as a deny rule wins: `127.0.0.2/32` re-allows
//!   that one loopback address, `0.0.0.0/0` re-allows none of the denied ranges, and a name on
//!   the allow list vouches for the name, not for the addresses it resolves to.
//! - **Host forms**: a literal is read as the C library's resolver reads it (`127.1`,
//!   `2130706433`, `0177.0.0.1`, `0x7f.1`, `[::ffff:127.0.0.1]`), so every spelling of an
//!   address gets that address's verdict.
//!
//! Redirects are no concern here: the controller's client does not follow them.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::field_error::FieldError;

mod host;
mod learned;
pub mod metadata;
mod refusal;
mod verdict;

pub use host::{Host, embedded_v4, inet_aton};
pub use learned::{Change, Inside, Learned, Range};
pub use metadata::{METADATA_ADDRESSES, METADATA_NAMES, metadata_address, metadata_name};
pub use refusal::{Refusal, Rule};

/// The schemes allowed unless configured otherwise.
pub const DEFAULT_SCHEMES: [&str; 2] = ["https", "http"];

/// A sink URL that passed the static checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: String,
    pub host: Host,
    pub port: Option<u16>,
}

/// A flag value the policy cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--cloud-event-sink-{flag} {value:?}: {why}")]
pub struct FlagError {
    pub flag: &'static str,
    pub value: String,
    pub why: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum NamePattern {
    Exact(String),
    /// `*.example.com`, kept as `.example.com`: names under it, not the name itself.
    Under(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Denial {
    net: IpNet,
    why: String,
}

/// Which schemes, addresses and names a CloudEvent may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkPolicy {
    schemes: Vec<String>,
    allowed_nets: Vec<IpNet>,
    allowed_names: Vec<NamePattern>,
    denied: Vec<Denial>,
}

impl Default for SinkPolicy {
    fn default() -> Self {
        Self {
            schemes: DEFAULT_SCHEMES.map(str::to_owned).to_vec(),
            allowed_nets: Vec::new(),
            allowed_names: Vec::new(),
            denied: Vec::new(),
        }
    }
}

impl SinkPolicy {
    /// The policy of the three flags' values: schemes; CIDRs, addresses, names and `*.suffix`
    /// patterns to allow; CIDRs and addresses to deny.
    pub fn from_flags(
        schemes: &[String],
        allow: &[String],
        deny: &[String],
    ) -> Result<Self, FlagError> {
        let error = |flag, value: &str, why| FlagError {
            flag,
            value: value.to_owned(),
            why,
        };
        let mut policy = Self {
            schemes: Vec::new(),
            ..Self::default()
        };
        for scheme in schemes.iter().map(|scheme| scheme.trim()) {
            if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(error("schemes", scheme, "is not a URL scheme, e.g. https"));
            }
            policy.schemes.push(scheme.to_ascii_lowercase());
        }
        for entry in allow.iter().map(|entry| entry.trim()) {
            let refused = "is not a CIDR, an IP address, a host name or *.suffix";
            if let Some(net) = net(entry) {
                policy.allowed_nets.push(net);
            } else if let Some(suffix) = entry.strip_prefix("*.") {
                match host::parse(suffix) {
                    Ok(Host::Name(name)) => policy
                        .allowed_names
                        .push(NamePattern::Under(format!(".{name}"))),
                    _ => return Err(error("allow", entry, refused)),
                }
            } else {
                match host::parse(entry) {
                    Ok(Host::Name(name)) => policy.allowed_names.push(NamePattern::Exact(name)),
                    _ => return Err(error("allow", entry, refused)),
                }
            }
        }
        for entry in deny.iter().map(|entry| entry.trim()) {
            let net =
                net(entry).ok_or_else(|| error("deny", entry, "is not a CIDR or an IP address"))?;
            policy.deny(net, "denied by --cloud-event-sink-deny");
        }
        Ok(policy)
    }

    /// Refuses `net` too, saying `why` (e.g. "the API server's address").
    pub fn deny(&mut self, net: IpNet, why: impl Into<String>) {
        self.denied.push(Denial {
            net: net.trunc(),
            why: why.into(),
        });
    }

    /// Refuses `address` alone too, saying `why`.
    pub fn deny_address(&mut self, address: IpAddr, why: impl Into<String>) {
        self.deny(IpNet::from(address), why);
    }

    /// The static verdict on a sink URL: its scheme, and its host when that is an address in any
    /// form or a name the allow list decides. A name that passes is judged again, address by
    /// address, once resolved ([`Self::check_resolved`]).
    pub fn check_url(&self, url: &str) -> Result<Target, Refusal> {
        let malformed = |why| Refusal::new(url, None, Rule::Malformed(why));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| malformed("is not a URL: scheme://host[:port]/path"))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let (host, port) = host::split_authority(authority).map_err(malformed)?;
        let host = self.check_parts(scheme, host)?;
        Ok(Target {
            scheme: scheme.to_ascii_lowercase(),
            host,
            port,
        })
    }

    /// The static verdict on a scheme and a host as a URL carries it (IPv6 in brackets).
    pub fn check_parts(&self, scheme: &str, host: &str) -> Result<Host, Refusal> {
        if !self.schemes.contains(&scheme.to_ascii_lowercase()) {
            let allowed = self.schemes.clone();
            return Err(Refusal::new(scheme, None, Rule::Scheme { allowed }));
        }
        let parsed =
            host::parse(host).map_err(|why| Refusal::new(host, None, Rule::Malformed(why)))?;
        match &parsed {
            Host::Address(address) => {
                let written = host.trim_start_matches('[').trim_end_matches(']');
                self.judge(*address, false)
                    .map_err(|rule| Refusal::new(written, Some(*address), rule))?;
            }
            Host::Name(name) => self.check_name(name)?,
        }
        Ok(parsed)
    }

    /// The verdict on an address, reached by no name the allow list vouches for.
    pub fn check_address(&self, address: IpAddr) -> Result<(), Refusal> {
        self.judge(address, false)
            .map_err(|rule| Refusal::new(address.to_string(), Some(address), rule))
    }

    /// The verdict on `address`, which `name` resolved to: a name on the allow list makes its
    /// addresses allowed unless denied; otherwise as [`Self::check_address`].
    pub fn check_resolved(&self, name: &str, address: IpAddr) -> Result<(), Refusal> {
        let name = normal_name(name);
        if let Some(rule) = self.metadata_rule(&name) {
            return Err(Refusal::new(name, None, rule));
        }
        self.judge(address, self.vouches_for(&name))
            .map_err(|rule| Refusal::new(name, Some(address), rule))
    }

    fn check_name(&self, name: &str) -> Result<(), Refusal> {
        let vouched = self.vouches_for(name);
        let refused = |rule| Err(Refusal::new(name, None, rule));
        if !vouched && (name == "localhost" || name.ends_with(".localhost")) {
            return refused(Rule::LoopbackName);
        }
        if let Some(rule) = self.metadata_rule(name) {
            return refused(rule);
        }
        if !vouched && self.allowed_nets.is_empty() && !self.allowed_names.is_empty() {
            return refused(Rule::NotAllowed);
        }
        Ok(())
    }

    /// The refusal of a metadata service's name, unless the allow list names it exactly (as
    /// specific as the denial; `*.internal` vouches for names under it, not for this one).
    fn metadata_rule(&self, name: &str) -> Option<Rule> {
        let what = metadata_name(name)?;
        let exact = NamePattern::Exact(name.to_owned());
        (!self.allowed_names.contains(&exact)).then_some(Rule::Metadata(what))
    }

    fn vouches_for(&self, name: &str) -> bool {
        self.allowed_names.iter().any(|pattern| match pattern {
            NamePattern::Exact(exact) => exact == name,
            NamePattern::Under(suffix) => {
                name.len() > suffix.len() && name.ends_with(suffix.as_str())
            }
        })
    }

    fn allows_only_some(&self) -> bool {
        !self.allowed_nets.is_empty() || !self.allowed_names.is_empty()
    }
}

/// A CIDR, or an address in any literal form as a single-address CIDR.
fn net(entry: &str) -> Option<IpNet> {
    if let Ok(net) = entry.parse::<IpNet>() {
        return Some(net.trunc());
    }
    match host::parse(entry) {
        Ok(Host::Address(address)) => Some(IpNet::from(address)),
        _ => None,
    }
}

fn normal_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    lower.strip_suffix('.').unwrap_or(&lower).to_owned()
}

/// The denial of a sink written at `path` that is no http(s) URL (the sink policy may refuse
/// more at connection time; admission only warns of that).
pub fn url_error(path: &str, sink: &str) -> Option<FieldError> {
    let http = sink.starts_with("http://") || sink.starts_with("https://");
    (!http).then(|| {
        FieldError::new(
            path,
            &serde_json::Value::String(sink.to_owned()),
            crate::schema_rules::URL_RULE,
        )
    })
}
