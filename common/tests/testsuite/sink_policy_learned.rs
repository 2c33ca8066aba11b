//! What the controller learns of the cluster (`sink_policy::Learned`): generated, every address
//! inside a learned CIDR is refused (and its IPv6 forms), naming what the range is; an allow
//! rule at least as specific re-allows it, one less specific does not. And the index: a range
//! stays denied while any object says it, a fresh list drops what it no longer names, and each
//! update answers what entered and left the deny list.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use kube_retention_common::sink_policy::{Change, Inside, Learned, Range, Rule, SinkPolicy};
use proptest::prelude::*;

fn net(text: &str) -> IpNet {
    text.parse()
        .unwrap_or_else(|error| panic!("{text}: {error}"))
}

fn allowing(allow: &[String]) -> SinkPolicy {
    SinkPolicy::from_flags(&["https".into(), "http".into()], allow, &[])
        .unwrap_or_else(|error| panic!("{error}"))
}

/// A learned CIDR, an address inside it, and the length of an allow rule covering the address
/// at least as specific as the CIDR.
fn inside() -> impl Strategy<Value = (IpNet, IpAddr, u8)> {
    let v4 = (any::<u32>(), 8u8..=32, any::<u32>(), any::<u8>()).prop_map(
        |(base, length, offset, extra)| {
            let net = IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::from(base), length).trunc());
            let mask = mask32(length);
            let address = Ipv4Addr::from((base & mask) | (offset & !mask));
            let allow = length + extra % (33 - length);
            (net, IpAddr::V4(address), allow)
        },
    );
    let v6 = (any::<u128>(), 16u8..=128, any::<u128>(), any::<u8>()).prop_map(
        |(base, length, offset, extra)| {
            let net = IpNet::V6(Ipv6Net::new_assert(Ipv6Addr::from(base), length).trunc());
            let mask = mask128(length);
            let address = Ipv6Addr::from((base & mask) | (offset & !mask));
            let allow = length + extra % (129 - length);
            (net, IpAddr::V6(address), allow)
        },
    );
    prop_oneof![v4, v6]
}

fn mask32(length: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(length)).unwrap_or(0)
}

fn mask128(length: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(length)).unwrap_or(0)
}

fn inside_kind() -> impl Strategy<Value = Inside> {
    prop::sample::select(Inside::ALL.to_vec())
}

/// `address`/`length` as an allow flag's value.
fn cidr(address: IpAddr, length: u8) -> String {
    IpNet::new(address, length)
        .unwrap_or_else(|error| panic!("{error}"))
        .trunc()
        .to_string()
}

proptest! {
    #[test]
    fn every_address_inside_a_learned_cidr_is_refused((learned_net, address, _) in inside(), kind in inside_kind()) {
        let mut learned = Learned::default();
        learned.apply("Node", "worker", [Range::new(learned_net, kind)]);
        let policy = SinkPolicy::default().with_learned(&learned);
        let refusal = policy.check_address(address);
        prop_assert!(refusal.is_err(), "{} in {}", address, learned_net);
        // Where no rule of the default policy is more specific, the learned range decides.
        if SinkPolicy::default().check_address(address).is_ok() {
            let refusal = refusal.expect_err("refused");
            prop_assert_eq!(refusal.rule, Rule::Denied { net: learned_net, why: kind.why().to_owned() });
        }
        if let IpAddr::V4(v4) = address {
            prop_assert!(policy.check_address(IpAddr::V6(v4.to_ipv6_mapped())).is_err());
        }
    }

    #[test]
    fn an_allow_rule_at_least_as_specific_re_allows_and_a_broader_one_does_not(
        (learned_net, address, length) in inside(),
        kind in inside_kind(),
    ) {
        let mut learned = Learned::default();
        learned.apply("ServiceCIDR", "kubernetes", [Range::new(learned_net, kind)]);
        let allow = [cidr(address, length)];
        let base = allowing(&allow);
        // The learned denial no longer counts: the verdict is the one without it.
        prop_assert_eq!(
            base.with_learned(&learned).check_address(address),
            base.check_address(address)
        );
        if SinkPolicy::default().check_address(address).is_ok() {
            prop_assert_eq!(base.with_learned(&learned).check_address(address), Ok(()));
        }
        if learned_net.prefix_len() > 0 {
            let broader = allowing(&[cidr(address, learned_net.prefix_len() - 1)]);
            prop_assert!(broader.with_learned(&learned).check_address(address).is_err());
        }
    }
}

#[test]
fn a_range_stays_denied_while_any_object_says_it() {
    let shared = Range::new(net("203.0.113.7/32"), Inside::NodeAddress);
    let own = Range::new(net("10.244.1.0/24"), Inside::PodCidr);
    let mut learned = Learned::default();
    let first = learned.apply("Node", "a", [shared, own]);
    assert_eq!(first.added.len(), 2);
    assert!(first.removed.is_empty());
    assert_eq!(learned.apply("Node", "b", [shared]), Change::default());
    assert_eq!(
        learned.apply("Node", "a", [shared, own]),
        Change::default(),
        "unchanged"
    );
    assert_eq!(
        learned.delete("Node", "a"),
        Change {
            added: vec![],
            removed: vec![own]
        }
    );
    let policy = SinkPolicy::default().with_learned(&learned);
    assert!(
        policy
            .check_address("203.0.113.7".parse().expect("ip"))
            .is_err()
    );
    assert_eq!(
        policy.check_address("10.244.1.9".parse().expect("ip")),
        Ok(())
    );
    assert_eq!(
        learned.delete("Node", "b"),
        Change {
            added: vec![],
            removed: vec![shared]
        }
    );
    assert_eq!(learned.ranges().count(), 0);
}

#[test]
fn a_fresh_list_keeps_only_what_it_names_and_other_kinds_alone() {
    let service = Range::new(net("10.96.0.0/12"), Inside::ServiceCidr);
    let node = Range::new(net("192.0.2.10/32"), Inside::NodeAddress);
    let moved = Range::new(net("192.0.2.11/32"), Inside::NodeAddress);
    let mut learned = Learned::default();
    learned.apply("ServiceCIDR", "kubernetes", [service]);
    learned.apply("Node", "old", [node]);
    learned.apply("Node", "kept", [moved]);
    // "old" went while the watch was down; its address moved to a new node, "kept" left too.
    let change = learned.reset(
        "Node",
        [("new".to_owned(), vec![node]), ("kept".to_owned(), vec![])],
    );
    assert_eq!(
        change,
        Change {
            added: vec![],
            removed: vec![moved]
        }
    );
    assert_eq!(learned.count(Inside::NodeAddress), 1);
    assert_eq!(learned.count(Inside::ServiceCidr), 1);
    let change = learned.reset("ServiceCIDR", []);
    assert_eq!(change.removed, vec![service]);
    let refusal = SinkPolicy::default()
        .with_learned(&learned)
        .check_address("192.0.2.10".parse().expect("ip"))
        .expect_err("a node's address");
    assert_eq!(
        refusal.what(),
        "192.0.2.10 is in 192.0.2.10/32, a node's address"
    );
}
