//! Why the sink policy refused a destination, worded to teach: the rule that refused it, and the
//! flag an admin would change to allow it on purpose.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use super::host::embedded_v4;

/// The rule that refused a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// The URL's scheme is not one of the allowed ones.
    Scheme {
        allowed: Vec<String>,
    },
    /// The URL cannot be read; why.
    Malformed(&'static str),
    /// `localhost` or a name under it (RFC 6761: they are loopback).
    LoopbackName,
    Loopback,
    Unspecified,
    LinkLocal,
    Multicast,
    Broadcast,
    /// A cloud's instance metadata or platform service, by address or by name: what it is
    /// ([`super::METADATA_ADDRESSES`], [`super::METADATA_NAMES`]).
    Metadata(&'static str),
    /// In a range the caller denied, and why it did.
    Denied {
        net: IpNet,
        why: String,
    },
    /// The allow list is not empty and covers neither the address nor the name.
    NotAllowed,
}

/// A destination the sink policy refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What was judged, as written: a scheme, a URL, a host name or an address.
    pub subject: String,
    /// The address judged, when the subject is or resolved to one.
    pub address: Option<IpAddr>,
    pub rule: Rule,
}

impl Refusal {
    pub fn new(subject: impl Into<String>, address: Option<IpAddr>, rule: Rule) -> Self {
        Self {
            subject: subject.into(),
            address,
            rule,
        }
    }

    /// What is refused and by which rule, e.g. `127.0.0.1 is a loopback address`.
    pub fn what(&self) -> String {
        let subject = &self.subject;
        let named = match self.address {
            Some(address) if address.to_string() != *subject => format!("{subject} ({address})"),
            _ => subject.clone(),
        };
        match &self.rule {
            Rule::Scheme { allowed } => {
                format!(
                    "the scheme {subject:?} is not one of {}",
                    allowed.join(", ")
                )
            }
            Rule::Malformed(why) => format!("{subject:?} {why}"),
            Rule::LoopbackName => format!("{subject} is a loopback name"),
            Rule::Loopback => format!("{named} is a loopback address"),
            Rule::Unspecified => format!("{named} is an unspecified address"),
            Rule::LinkLocal => format!("{named} is a link-local address"),
            Rule::Multicast => format!("{named} is a multicast address"),
            Rule::Broadcast => format!("{named} is the broadcast address"),
            Rule::Metadata(what) => format!("{named} is {what}"),
            Rule::Denied { net, why } => format!("{named} is in {net}, {why}"),
            Rule::NotAllowed => format!("{named} is not covered by --cloud-event-sink-allow"),
        }
    }

    /// The flag that would allow this destination on purpose, if one would.
    pub fn hint(&self) -> Option<String> {
        match (&self.rule, self.address) {
            (Rule::Scheme { allowed }, _) => Some(format!(
                "--cloud-event-sink-schemes={},{}",
                allowed.join(","),
                self.subject.to_ascii_lowercase()
            )),
            (Rule::Malformed(_) | Rule::LoopbackName, _) => None,
            (Rule::NotAllowed | Rule::Metadata(_), None) => {
                Some(format!("--cloud-event-sink-allow={}", self.subject))
            }
            (_, Some(address)) => Some(format!("--cloud-event-sink-allow={}", single(address))),
            (_, None) => None,
        }
    }
}

/// `address` alone as a CIDR, in the IPv4 form an IPv6 address embeds, if any: the form the
/// rule that refused it was written in.
fn single(address: IpAddr) -> IpNet {
    match address {
        IpAddr::V6(v6) => {
            embedded_v4(v6).map_or(IpNet::from(address), |v4| IpNet::from(IpAddr::V4(v4)))
        }
        IpAddr::V4(_) => IpNet::from(address),
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: refused by the sink policy", self.what())?;
        if let Some(hint) = self.hint() {
            write!(formatter, " (allow it with {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}
