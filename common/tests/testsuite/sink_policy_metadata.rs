//! The clouds' metadata services (`kube_retention_common::sink_policy::metadata`, the one
//! table): every address in the table is refused in every spelling the host parser reads, and
//! every name in every form of it, naming what it is; the refusal is more specific than
//! link-local, so re-opening link-local does not re-open them, and only an allow rule as
//! specific as the entry (the /32 or /128, the exact name) does.

use std::net::IpAddr;

use kube_retention_common::sink_policy::{
    METADATA_ADDRESSES, METADATA_NAMES, Rule, SinkPolicy, metadata_address, metadata_name,
};

use crate::spellings;

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn policy(allow: &[&str]) -> SinkPolicy {
    SinkPolicy::from_flags(&strings(&["https", "http"]), &strings(allow), &[])
        .unwrap_or_else(|error| panic!("{error}"))
}

fn rule(policy: &SinkPolicy, host: &str) -> Option<Rule> {
    let url = format!("http://{host}:80/latest/meta-data/");
    policy.check_url(&url).err().map(|refusal| refusal.rule)
}

/// Every spelling of every address in the table, with the address.
fn spelled_addresses() -> Vec<(IpAddr, String)> {
    let mut spelled = Vec::new();
    for (net, _) in METADATA_ADDRESSES {
        let address = net.addr();
        let spellings = match address {
            IpAddr::V4(v4) => [spellings::v4(v4), spellings::v4_in_v6(v4)].concat(),
            IpAddr::V6(v6) => spellings::v6(v6),
        };
        spelled.extend(spellings.into_iter().map(|spelling| (address, spelling)));
    }
    spelled
}

#[test]
fn every_metadata_address_is_refused_in_every_spelling_saying_what_it_is() {
    let policy = SinkPolicy::default();
    let spelled = spelled_addresses();
    assert!(spelled.len() >= METADATA_ADDRESSES.len() * 5);
    for (address, spelling) in spelled {
        let what = metadata_address(address).expect("in the table");
        assert_eq!(
            rule(&policy, &spelling),
            Some(Rule::Metadata(what)),
            "{spelling}"
        );
    }
    for (net, what) in METADATA_ADDRESSES {
        let refusal = policy.check_address(net.addr()).expect_err("refused");
        assert_eq!(refusal.rule, Rule::Metadata(what));
        assert_eq!(refusal.what(), format!("{} is {what}", net.addr()));
    }
}

#[test]
fn every_metadata_name_is_refused_in_every_form_before_it_is_resolved() {
    let policy = SinkPolicy::default();
    for (name, what) in METADATA_NAMES {
        for form in [
            name.to_owned(),
            name.to_ascii_uppercase(),
            format!("{name}."),
            format!("{}.", name.to_ascii_uppercase()),
        ] {
            for url in [
                format!("http://{form}/computeMetadata/v1/"),
                format!("https://{form}:8443/"),
                format!("http://user:secret@{form}:80/x?y#z"),
            ] {
                let refusal = policy.check_url(&url).expect_err(&url);
                assert_eq!(refusal.rule, Rule::Metadata(what), "{url}");
                assert_eq!(refusal.subject, name, "{url}");
                assert_eq!(refusal.address, None, "{url}");
            }
            let public: IpAddr = "93.184.216.34".parse().expect("an address");
            let resolved = policy.check_resolved(&form, public).expect_err(&form);
            assert_eq!(resolved.rule, Rule::Metadata(what), "{form} resolved");
        }
    }
    let refusal = policy
        .check_url("http://Metadata.Google.Internal./")
        .expect_err("a metadata name");
    assert_eq!(
        refusal.to_string(),
        "metadata.google.internal is the name of GCP's metadata server: refused by the sink \
         policy (allow it with --cloud-event-sink-allow=metadata.google.internal)"
    );
    assert_eq!(metadata_name("metadata.google.internal.example"), None);
    assert_eq!(rule(&policy, "metadata.google.internal.example"), None);
    assert_eq!(rule(&policy, "my-metadata"), None);
}

#[test]
fn the_addresses_outside_link_local_are_refused_too() {
    let policy = SinkPolicy::default();
    for host in [
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
        "[fd00:ec2::254]",
        "[fd20:ce::254]",
    ] {
        assert!(
            matches!(rule(&policy, host), Some(Rule::Metadata(_))),
            "{host}"
        );
    }
    for neighbour in [
        "168.63.129.17",
        "100.100.100.201",
        "192.0.0.193",
        "[fd00:ec2::255]",
    ] {
        assert_eq!(rule(&policy, neighbour), None, "{neighbour}");
    }
    let refusal = policy
        .check_url("http://168.63.129.16/")
        .expect_err("WireServer");
    assert_eq!(
        refusal.to_string(),
        "168.63.129.16 is Azure's WireServer (the VM agent's platform channel): refused by the \
         sink policy (allow it with --cloud-event-sink-allow=168.63.129.16/32)"
    );
}

#[test]
fn only_an_allow_rule_as_specific_as_the_entry_re_opens_it() {
    let link_local = policy(&["169.254.0.0/16", "fe80::/10"]);
    assert_eq!(rule(&link_local, "169.254.1.1"), None);
    assert!(matches!(
        rule(&link_local, "169.254.169.254"),
        Some(Rule::Metadata(_))
    ));
    assert!(matches!(
        rule(&link_local, "[fe80::a9fe:a9fe]"),
        Some(Rule::Metadata(_))
    ));
    let everything = policy(&["0.0.0.0/0", "::/0"]);
    for (net, _) in METADATA_ADDRESSES {
        assert!(everything.check_address(net.addr()).is_err(), "{net}");
    }
    let one = policy(&["169.254.169.254/32"]);
    assert_eq!(rule(&one, "169.254.169.254"), None);
    assert_eq!(rule(&one, "[::ffff:169.254.169.254]"), None);
    let under = policy(&["*.google.internal", "*.internal"]);
    assert!(matches!(
        rule(&under, "metadata.google.internal"),
        Some(Rule::Metadata(_))
    ));
    assert_eq!(rule(&under, "sink.google.internal"), None);
    let exact = policy(&["metadata.google.internal"]);
    assert_eq!(rule(&exact, "metadata.google.internal"), None);
    assert!(matches!(rule(&exact, "metadata"), Some(Rule::Metadata(_))));
    // The name vouched for; its address still judged on its own.
    let address = "169.254.169.254".parse().expect("an address");
    assert!(
        exact
            .check_resolved("metadata.google.internal", address)
            .is_err()
    );
}
