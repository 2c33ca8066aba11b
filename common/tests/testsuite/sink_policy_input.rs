//! What the sink policy cannot read: a sink URL that is no URL it can judge (refused, saying
//! why), and flag values it cannot use (an error naming the flag).

use kube_retention_common::sink_policy::{Rule, SinkPolicy};

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn rule(policy: &SinkPolicy, url: &str) -> Option<Rule> {
    policy.check_url(url).err().map(|refusal| refusal.rule)
}

#[test]
fn a_url_that_cannot_be_read_is_refused_naming_why() {
    let policy = SinkPolicy::default();
    for (url, why) in [
        (
            "events.example.com",
            "is not a URL: scheme://host[:port]/path",
        ),
        ("http:///path", "has no host"),
        ("http://[::1/", "has an unclosed ["),
        ("http://[::1]x/", "has text after ]"),
        ("http://sink.example:99999/", "has a port above 65535"),
        (
            "http://sink.example:http/",
            "has a port that is not a number",
        ),
        (
            "http://%31%32%37.0.0.1/",
            "is not a host name (letters, digits, -, _ and dots)",
        ),
    ] {
        assert_eq!(rule(&policy, url), Some(Rule::Malformed(why)), "{url}");
    }
}

#[test]
fn flags_that_cannot_be_used_are_refused_naming_the_flag() {
    let error = |schemes: &[&str], allow: &[&str], deny: &[&str]| {
        SinkPolicy::from_flags(&strings(schemes), &strings(allow), &strings(deny))
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        error(&["https"], &["10.0.0.0/33"], &[]),
        "--cloud-event-sink-allow \"10.0.0.0/33\": is not a CIDR, an IP address, a host name or \
         *.suffix"
    );
    assert_eq!(
        error(&["https"], &[], &["sink.example"]),
        "--cloud-event-sink-deny \"sink.example\": is not a CIDR or an IP address"
    );
    assert_eq!(
        error(&["http:"], &[], &[]),
        "--cloud-event-sink-schemes \"http:\": is not a URL scheme, e.g. https"
    );
    assert_eq!(
        error(&["https"], &["*.[::1]"], &[]),
        "--cloud-event-sink-allow \"*.[::1]\": is not a CIDR, an IP address, a host name or \
         *.suffix"
    );
}
