//! Properties of the sink policy: however an IPv4 address is spelled — dotted, one decimal
//! number, octal or hexadecimal parts, the short forms `a.b.c` and `a.b`, IPv4-mapped IPv6 —
//! it gets the verdict of its dotted form, under the default policy and under random allow and
//! deny lists; and the verdict on a resolved address agrees with the URL's. The default policy
//! refuses exactly the special ranges and the clouds' metadata addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use kube_retention_common::sink_policy::{Rule, SinkPolicy, inet_aton, metadata_address};
use proptest::prelude::*;

use crate::spellings;

use spellings::v4 as spellings;

/// A verdict, comparable across spellings: allowed, or the rule that refused.
fn verdict(policy: &SinkPolicy, host: &str) -> Result<(), Rule> {
    policy
        .check_url(&format!("http://{host}:8080/path"))
        .map(|_| ())
        .map_err(|refusal| refusal.rule)
}

fn net() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<u32>(), 0u8..=32)
            .prop_map(|(address, length)| format!("{}/{length}", Ipv4Addr::from(address))),
        // Near the denied ranges, where allow and deny meet.
        (
            prop_oneof![Just(127u8), Just(169), Just(0), Just(10), Just(224)],
            any::<u16>(),
            8u8..=32
        )
            .prop_map(|(first, rest, length)| {
                let [b, c] = rest.to_be_bytes();
                format!("{first}.{b}.{c}.1/{length}")
            }),
    ]
}

fn policy() -> impl Strategy<Value = SinkPolicy> {
    (
        prop::collection::vec(net(), 0..3),
        prop::collection::vec(net(), 0..3),
    )
        .prop_map(|(allow, deny)| {
            SinkPolicy::from_flags(&["https".into(), "http".into()], &allow, &deny)
                .unwrap_or_else(|error| panic!("{error}"))
        })
}

/// Addresses: any, the clouds' metadata addresses outside the special ranges (and a neighbour of
/// one), and ones in or next to the default denied ranges.
fn address() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        any::<u32>().prop_map(Ipv4Addr::from),
        prop_oneof![
            Just(Ipv4Addr::new(168, 63, 129, 16)),
            Just(Ipv4Addr::new(100, 100, 100, 200)),
            Just(Ipv4Addr::new(192, 0, 0, 192)),
            Just(Ipv4Addr::new(100, 100, 100, 201)),
        ],
        (
            prop_oneof![Just(127u8), Just(169), Just(0), Just(255), Just(224)],
            any::<[u8; 3]>()
        )
            .prop_map(|(first, [b, c, d])| Ipv4Addr::new(first, b, c, d)),
    ]
}

proptest! {
    #[test]
    fn every_spelling_reads_as_the_dotted_address(address in address()) {
        for spelling in spellings(address) {
            let trimmed = spelling.strip_suffix('.').unwrap_or(&spelling);
            prop_assert_eq!(inet_aton(trimmed), Some(address), "{}", spelling);
        }
    }

    #[test]
    fn every_spelling_gets_the_dotted_verdict(address in address(), policy in policy()) {
        let dotted = verdict(&policy, &address.to_string());
        for spelling in spellings(address) {
            prop_assert_eq!(&verdict(&policy, &spelling), &dotted, "{}", spelling);
        }
        let mapped = address.to_ipv6_mapped();
        prop_assert_eq!(&verdict(&policy, &format!("[{mapped}]")), &dotted, "{}", mapped);
        let hex = format!("[::ffff:{:x}:{:x}]", u32::from(address) >> 16, u32::from(address) & 0xffff);
        prop_assert_eq!(&verdict(&policy, &hex), &dotted, "{}", hex);
    }

    #[test]
    fn the_default_policy_refuses_exactly_the_special_ranges(address in address()) {
        let [a, b, ..] = address.octets();
        let special = a == 0 || a == 127 || (a, b) == (169, 254) || (224..=239).contains(&a)
            || address == Ipv4Addr::BROADCAST
            || metadata_address(IpAddr::V4(address)).is_some();
        let refused = verdict(&SinkPolicy::default(), &address.to_string()).is_err();
        prop_assert_eq!(refused, special);
    }

    #[test]
    fn a_resolved_address_gets_the_verdict_of_its_literal(address in address(), policy in policy()) {
        let literal = verdict(&policy, &address.to_string());
        let resolved = policy.check_address(IpAddr::V4(address)).map_err(|refusal| refusal.rule);
        prop_assert_eq!(&resolved, &literal);
        let mapped = IpAddr::V6(address.to_ipv6_mapped());
        let resolved = policy.check_address(mapped).map_err(|refusal| refusal.rule);
        prop_assert_eq!(&resolved, &literal);
    }

    #[test]
    fn an_ipv6_address_judged_literally_or_resolved_agrees(segments in any::<[u16; 8]>()) {
        let address = Ipv6Addr::from(segments);
        let policy = SinkPolicy::default();
        let literal = verdict(&policy, &format!("[{address}]"));
        let resolved = policy.check_address(IpAddr::V6(address)).map_err(|refusal| refusal.rule);
        prop_assert_eq!(resolved, literal);
    }
}
