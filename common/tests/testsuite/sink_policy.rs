//! The sink policy's verdicts: the default deny list in IPv4, IPv6 and IPv6 forms of IPv4,
//! every literal spelling of an address, allow lists of CIDRs and names, schemes, and the
//! wording of a refusal. Properties of the spellings are in `sink_policy_forms.rs`, what the
//! policy cannot read in `sink_policy_input.rs`, the clouds' metadata services (169.254.169.254
//! among them, more specific than link-local) in `sink_policy_metadata.rs`, what the controller
//! learns of the cluster in `sink_policy_learned.rs`.

use std::net::IpAddr;

use kube_retention_common::sink_policy::{Host, Refusal, Rule, SinkPolicy};

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn policy(allow: &[&str], deny: &[&str]) -> SinkPolicy {
    SinkPolicy::from_flags(
        &strings(&["https", "http"]),
        &strings(allow),
        &strings(deny),
    )
    .unwrap_or_else(|error| panic!("{error}"))
}

fn rule(policy: &SinkPolicy, url: &str) -> Option<Rule> {
    policy.check_url(url).err().map(|refusal| refusal.rule)
}

fn address(text: &str) -> IpAddr {
    text.parse()
        .unwrap_or_else(|error| panic!("{text}: {error}"))
}

#[test]
fn the_default_policy_refuses_the_controllers_own_surroundings() {
    let policy = SinkPolicy::default();
    for (url, expected) in [
        ("http://127.0.0.1:9/", Rule::Loopback),
        ("http://127.255.0.3/", Rule::Loopback),
        ("http://[::1]:8080/", Rule::Loopback),
        ("http://0.0.0.0/", Rule::Unspecified),
        ("http://0.1.2.3/", Rule::Unspecified),
        ("http://[::]/", Rule::Unspecified),
        ("http://169.254.1.1/", Rule::LinkLocal),
        ("http://[fe80::1%25eth0]/", Rule::LinkLocal),
        ("http://224.0.0.1/", Rule::Multicast),
        ("http://[ff02::1]/", Rule::Multicast),
        ("http://255.255.255.255/", Rule::Broadcast),
        ("http://localhost:8080/", Rule::LoopbackName),
        ("http://metrics.LOCALHOST./", Rule::LoopbackName),
    ] {
        assert_eq!(rule(&policy, url), Some(expected), "{url}");
    }
    for url in [
        "https://events.example.com/hook",
        "http://10.0.0.5:8080/",
        "http://[2001:db8::5]/",
        "http://user:secret@sink.example:80/x?y#z",
    ] {
        assert_eq!(rule(&policy, url), None, "{url}");
    }
}

#[test]
fn ipv6_forms_of_a_denied_ipv4_address_are_denied_as_it_is() {
    let policy = SinkPolicy::default();
    for (url, expected) in [
        ("http://[::ffff:127.0.0.1]/", Rule::Loopback),
        ("http://[::ffff:7f00:1]/", Rule::Loopback),
        ("http://[::ffff:169.254.1.1]/", Rule::LinkLocal),
        ("http://[::127.0.0.1]/", Rule::Loopback),
        ("http://[64:ff9b::a9fe:101]/", Rule::LinkLocal),
        ("http://[2002:7f00:1::1]/", Rule::Loopback),
    ] {
        assert_eq!(rule(&policy, url), Some(expected), "{url}");
    }
    assert_eq!(rule(&policy, "http://[::ffff:93.184.216.34]/"), None);
    assert_eq!(rule(&policy, "http://[64:ff9b::5db8:d822]/"), None);
    // IPv4 rules count as mapped into IPv6: a /96 over every mapped address is broader than
    // 127.0.0.0/8, a /128 of one is as specific as 127.0.0.1/32.
    let mapped = self::policy(&["::ffff:0:0/96"], &[]);
    assert_eq!(
        rule(&mapped, "http://[::ffff:127.0.0.1]/"),
        Some(Rule::Loopback)
    );
    assert_eq!(rule(&mapped, "http://[::ffff:10.0.0.1]/"), None);
    let one = self::policy(&["::ffff:127.0.0.1/128"], &[]);
    assert_eq!(rule(&one, "http://[::ffff:127.0.0.1]/"), None);
}

#[test]
fn every_spelling_of_loopback_is_loopback() {
    let policy = SinkPolicy::default();
    for host in [
        "127.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "0x7f.1",
        "0x7F000001",
        "127.1",
        "127.0.1",
        "0x7f.0.0.0x1",
        "017700000001",
        "127.0.0.1.",
    ] {
        let url = format!("http://{host}:9/");
        let refusal = policy.check_url(&url).expect_err(&url);
        assert_eq!(refusal.rule, Rule::Loopback, "{url}");
        assert_eq!(refusal.address, Some(address("127.0.0.1")), "{url}");
    }
}

#[test]
fn a_name_that_merely_looks_numeric_stays_a_name() {
    let policy = SinkPolicy::default();
    for host in [
        "cafe.example",
        "0x7f.example",
        "08",
        "1.2.3.4.5",
        "4294967296",
    ] {
        let url = format!("http://{host}/");
        let target = policy
            .check_url(&url)
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(target.host, Host::Name(host.to_owned()), "{url}");
    }
}

#[test]
fn an_allow_rule_as_specific_as_a_denial_re_allows_it_and_a_broader_one_does_not() {
    let chosen = policy(&["127.0.0.2/32"], &[]);
    assert_eq!(rule(&chosen, "http://127.0.0.2:8080/"), None);
    assert_eq!(rule(&chosen, "http://127.2/"), None);
    assert_eq!(rule(&chosen, "http://[::ffff:127.0.0.2]/"), None);
    assert_eq!(rule(&chosen, "http://127.0.0.1/"), Some(Rule::Loopback));
    assert_eq!(rule(&chosen, "http://10.0.0.1/"), Some(Rule::NotAllowed));
    let everything = policy(&["0.0.0.0/0", "::/0"], &[]);
    assert_eq!(rule(&everything, "http://10.0.0.1/"), None);
    assert_eq!(rule(&everything, "http://127.0.0.1/"), Some(Rule::Loopback));
    assert_eq!(rule(&everything, "http://[::1]/"), Some(Rule::Loopback));
    let loopback = policy(&["127.0.0.0/8"], &[]);
    assert_eq!(rule(&loopback, "http://127.9.9.9/"), None);
}

#[test]
fn the_deny_list_and_the_callers_denials_refuse_unless_allowed_as_specifically() {
    let mut denied = policy(&[], &["10.96.0.0/12", "10.0.0.7"]);
    denied.deny_address(address("192.168.1.10"), "the API server's address");
    let refusal = denied.check_url("http://10.96.0.1/").expect_err("denied");
    assert_eq!(
        refusal.to_string(),
        "10.96.0.1 is in 10.96.0.0/12, denied by --cloud-event-sink-deny: refused by the sink \
         policy (allow it with --cloud-event-sink-allow=10.96.0.1/32)"
    );
    assert!(denied.check_url("http://10.0.0.7/").is_err());
    let api = denied
        .check_address(address("192.168.1.10"))
        .expect_err("denied");
    assert_eq!(
        api.what(),
        "192.168.1.10 is in 192.168.1.10/32, the API server's address"
    );
    assert_eq!(denied.check_address(address("10.0.0.8")), Ok(()));
    let broad = policy(&["10.0.0.0/8"], &["10.96.0.0/12"]);
    assert!(broad.check_address(address("10.96.0.1")).is_err());
    assert_eq!(broad.check_address(address("10.1.0.1")), Ok(()));
    let exact = policy(&["10.96.0.0/12"], &["10.96.0.0/12"]);
    assert_eq!(exact.check_address(address("10.96.0.1")), Ok(()));
}

#[test]
fn names_on_the_allow_list_vouch_for_the_name_not_for_denied_addresses() {
    let names = policy(&["events.example.com", "*.sinks.example"], &[]);
    assert_eq!(rule(&names, "https://events.example.com/"), None);
    assert_eq!(rule(&names, "https://EVENTS.example.com./"), None);
    assert_eq!(rule(&names, "https://a.b.sinks.example/"), None);
    assert_eq!(
        rule(&names, "https://sinks.example/"),
        Some(Rule::NotAllowed)
    );
    assert_eq!(
        rule(&names, "https://other.example/"),
        Some(Rule::NotAllowed)
    );
    assert_eq!(
        rule(&names, "https://93.184.216.34/"),
        Some(Rule::NotAllowed)
    );
    let public = address("93.184.216.34");
    assert_eq!(names.check_resolved("events.example.com", public), Ok(()));
    assert_eq!(
        names
            .check_resolved("events.example.com", address("127.0.0.1"))
            .map_err(|refusal| refusal.what()),
        Err("events.example.com (127.0.0.1) is a loopback address".to_owned())
    );
    assert!(names.check_resolved("other.example", public).is_err());
    assert!(names.check_address(public).is_err());
    let localhost = policy(&["localhost"], &[]);
    assert_eq!(rule(&localhost, "http://localhost/"), None);
    assert!(
        localhost
            .check_resolved("localhost", address("::1"))
            .is_err()
    );
}

#[test]
fn with_nets_on_the_allow_list_a_name_is_left_to_its_addresses() {
    let nets = policy(&["10.20.0.0/16"], &[]);
    assert_eq!(rule(&nets, "http://sink.team-a.svc/"), None);
    assert_eq!(
        nets.check_resolved("sink.team-a.svc", address("10.20.3.4")),
        Ok(())
    );
    assert!(
        nets.check_resolved("sink.team-a.svc", address("10.21.3.4"))
            .is_err()
    );
}

#[test]
fn schemes_are_the_allowed_ones_only() {
    let default = SinkPolicy::default();
    assert_eq!(rule(&default, "HTTPS://events.example.com/"), None);
    let refusal = default
        .check_url("ftp://events.example.com/")
        .expect_err("ftp");
    assert_eq!(
        refusal.to_string(),
        "the scheme \"ftp\" is not one of https, http: refused by the sink policy (allow it with \
         --cloud-event-sink-schemes=https,http,ftp)"
    );
    let https = SinkPolicy::from_flags(&strings(&["https"]), &[], &[]).expect("a policy");
    assert!(matches!(
        rule(&https, "http://events.example.com/"),
        Some(Rule::Scheme { .. })
    ));
    assert_eq!(rule(&https, "https://events.example.com/"), None);
}

#[test]
fn a_refusal_teaches_the_rule_and_the_flag() {
    let refusal = SinkPolicy::default()
        .check_url("http://127.0.0.1:9/")
        .expect_err("loopback");
    assert_eq!(
        refusal.to_string(),
        "127.0.0.1 is a loopback address: refused by the sink policy (allow it with \
         --cloud-event-sink-allow=127.0.0.1/32)"
    );
    let spelled = SinkPolicy::default()
        .check_url("http://2130706433/")
        .expect_err("loopback");
    assert_eq!(
        spelled.what(),
        "2130706433 (127.0.0.1) is a loopback address"
    );
    let mapped: Refusal = SinkPolicy::default()
        .check_url("http://[::ffff:169.254.1.1]/")
        .expect_err("link-local");
    assert_eq!(
        mapped.to_string(),
        "::ffff:169.254.1.1 is a link-local address: refused by the sink policy (allow it \
         with --cloud-event-sink-allow=169.254.1.1/32)"
    );
    let outside = policy(&["10.0.0.0/8"], &[])
        .check_url("http://8.8.8.8/")
        .expect_err("outside");
    assert_eq!(
        outside.what(),
        "8.8.8.8 is not covered by --cloud-event-sink-allow"
    );
}
