//! The verdict on an address: the ranges denied by default, the clouds' metadata addresses
//! ([`super::METADATA_ADDRESSES`]), the caller's denials (the admin's, and what the controller
//! learned of the cluster) and the allow list, the most specific rule covering the address
//! deciding.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::{METADATA_ADDRESSES, Rule, SinkPolicy, embedded_v4};

const fn v4(a: u8, b: u8, c: u8, d: u8, length: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), length))
}

const fn v6(first: u16, last: u16, length: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(first, 0, 0, 0, 0, 0, 0, last),
        length,
    ))
}

/// Refused unless an allow rule at least as specific covers them.
const DENIED: [(IpNet, Rule); 9] = [
    (v4(0, 0, 0, 0, 8), Rule::Unspecified),
    (v4(127, 0, 0, 0, 8), Rule::Loopback),
    (v4(169, 254, 0, 0, 16), Rule::LinkLocal),
    (v4(224, 0, 0, 0, 4), Rule::Multicast),
    (v4(255, 255, 255, 255, 32), Rule::Broadcast),
    (v6(0, 0, 128), Rule::Unspecified),
    (v6(0, 1, 128), Rule::Loopback),
    (v6(0xfe80, 0, 10), Rule::LinkLocal),
    (v6(0xff00, 0, 8), Rule::Multicast),
];

impl SinkPolicy {
    /// The most specific rule covering `address` decides; `vouched` is a name on the allow list.
    pub(super) fn judge(&self, address: IpAddr, vouched: bool) -> Result<(), Rule> {
        // An IPv4 rule covering the address an IPv6 one embeds counts as that rule mapped
        // into IPv6 (96 bits longer), so IPv4 and IPv6 rules compare.
        let mut forms = vec![match address {
            IpAddr::V4(_) => (address, 96),
            IpAddr::V6(_) => (address, 0),
        }];
        if let IpAddr::V6(v6) = address
            && let Some(v4) = embedded_v4(v6)
        {
            forms.push((IpAddr::V4(v4), 96));
        }
        let covers = |net: &IpNet| {
            forms
                .iter()
                .filter(|(form, _)| net.contains(form))
                .map(|(_, offset)| u16::from(net.prefix_len()) + offset)
                .max()
        };
        let allowed = self.allowed_nets.iter().filter_map(covers).max();
        let defaults = DENIED
            .iter()
            .filter_map(|(net, rule)| Some((covers(net)?, rule.clone())));
        let metadata = METADATA_ADDRESSES
            .iter()
            .filter_map(|(net, what)| Some((covers(net)?, Rule::Metadata(what))));
        let extra = self.denied.iter().filter_map(|denial| {
            let rule = Rule::Denied {
                net: denial.net,
                why: denial.why.clone(),
            };
            Some((covers(&denial.net)?, rule))
        });
        let denied = defaults
            .chain(metadata)
            .chain(extra)
            .max_by_key(|(length, _)| *length);
        match (allowed, denied) {
            (Some(allowed), Some((denied, _))) if allowed >= denied => Ok(()),
            (_, Some((_, rule))) => Err(rule),
            (Some(_), None) => Ok(()),
            (None, None) if !vouched && self.allows_only_some() => Err(Rule::NotAllowed),
            (None, None) => Ok(()),
        }
    }
}
