//! The sink policy where the controller connects: a denied address is never connected to,
//! whether written as a literal or reached through a name, on every attempt; an address the
//! admin allowed on purpose receives the event.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube_retention_common::sink_policy::{Rule, SinkPolicy};
use kube_retention_sinks::guard;
use kube_retention_sinks::{Sender, Undelivered};

use crate::sink_support;

use sink_support::{Answer, allowing, event, lookup, quick, serve, serve_at};

fn refused_rule(undelivered: Undelivered) -> Rule {
    match undelivered {
        Undelivered::Refused(refusal) => refusal.rule,
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_loopback_sink_is_refused_without_a_connection_in_any_spelling() {
    let listener = serve("127.0.0.1", Answer::FailFirst(0)).await;
    let sender = Sender::new(Arc::new(SinkPolicy::default()));
    let port = listener.port;
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://localhost:{port}/"),
    ] {
        let undelivered = sender
            .deliver(&url, event(), &quick(3))
            .await
            .expect_err("refused");
        assert!(
            matches!(
                refused_rule(undelivered),
                Rule::Loopback | Rule::LoopbackName
            ),
            "{url}"
        );
    }
    assert_eq!(listener.accepted(), 0);
}

#[tokio::test]
async fn a_name_resolving_to_a_denied_address_is_refused_when_connecting_and_not_retried() {
    let listener = serve("127.0.0.1", Answer::FailFirst(0)).await;
    let (lookup, calls) = lookup(HashMap::from([("evil.test", vec![vec!["127.0.0.1"]])]));
    let sender = Sender::with_lookup(Arc::new(SinkPolicy::default()), lookup);
    let url = format!("http://evil.test:{}/", listener.port);
    let undelivered = sender
        .deliver(&url, event(), &quick(3))
        .await
        .expect_err("refused");
    assert_eq!(
        undelivered.note(&url),
        format!(
            "CloudEvent to {url} refused by the sink policy: evil.test (127.0.0.1) is a loopback \
             address"
        )
    );
    assert_eq!(listener.accepted(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_name_on_the_allow_list_that_the_system_resolves_to_loopback_is_refused() {
    let listener = serve("127.0.0.1", Answer::FailFirst(0)).await;
    let sender = Sender::new(allowing(&["localhost"]));
    let url = format!("http://localhost:{}/", listener.port);
    let undelivered = sender
        .deliver(&url, event(), &quick(2))
        .await
        .expect_err("refused");
    assert_eq!(refused_rule(undelivered), Rule::Loopback);
    assert_eq!(listener.accepted(), 0);
}

#[tokio::test]
async fn an_address_allowed_on_purpose_receives_the_event_by_literal_and_by_name() {
    let sink = serve("127.0.0.2", Answer::FailFirst(0)).await;
    let (lookup, _) = lookup(HashMap::from([("sink.test", vec![vec!["127.0.0.2"]])]));
    let sender = Sender::with_lookup(allowing(&["127.0.0.2/32"]), lookup);
    sender
        .deliver(&sink.url, event(), &quick(1))
        .await
        .expect("delivered by address");
    let named = format!("http://sink.test:{}/", sink.port);
    sender
        .deliver(&named, event(), &quick(1))
        .await
        .expect("delivered by name");
    assert_eq!(sink.requests(), 2);
    let other = serve("127.0.0.3", Answer::FailFirst(0)).await;
    let undelivered = sender
        .deliver(&other.url, event(), &quick(1))
        .await
        .expect_err("refused");
    assert_eq!(refused_rule(undelivered), Rule::Loopback);
    assert_eq!(other.accepted(), 0);
}

#[tokio::test]
async fn every_attempt_resolves_and_is_judged_afresh() {
    // The first answer is allowed and fails; then the name rebinds to a denied address.
    let sink = serve("127.0.0.2", Answer::FailFirst(u32::MAX)).await;
    let denied = serve_at("127.0.0.1", sink.port, Answer::FailFirst(0)).await;
    let (lookup, calls) = lookup(HashMap::from([(
        "rebind.test",
        vec![vec!["127.0.0.2"], vec!["127.0.0.1"]],
    )]));
    let sender = Sender::with_lookup(allowing(&["127.0.0.2/32"]), lookup);
    let url = format!("http://rebind.test:{}/", sink.port);
    let undelivered = sender
        .deliver(&url, event(), &quick(5))
        .await
        .expect_err("refused");
    assert_eq!(refused_rule(undelivered), Rule::Loopback);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(sink.requests(), 1);
    assert_eq!(denied.accepted(), 0);
}

#[tokio::test]
async fn of_a_names_addresses_only_the_allowed_ones_are_tried() {
    let sink = serve("127.0.0.2", Answer::FailFirst(0)).await;
    let denied = serve_at("127.0.0.1", sink.port, Answer::FailFirst(0)).await;
    let (lookup, _) = lookup(HashMap::from([(
        "mixed.test",
        vec![vec!["127.0.0.1", "127.0.0.2", "::1"]],
    )]));
    let sender = Sender::with_lookup(allowing(&["127.0.0.2/32"]), lookup);
    let url = format!("http://mixed.test:{}/", sink.port);
    sender
        .deliver(&url, event(), &quick(1))
        .await
        .expect("delivered to the allowed address");
    assert_eq!(sink.requests(), 1);
    assert_eq!(denied.accepted(), 0);
}

/// An error caused by another, as connectors wrap what their resolver said.
#[derive(Debug)]
struct Wrapped(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for Wrapped {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("dns error")
    }
}

impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

#[test]
fn a_refusal_is_found_among_an_errors_sources() {
    let refusal = SinkPolicy::default()
        .check_url("http://127.0.0.1/")
        .expect_err("refused");
    let wrapped = Wrapped(Box::new(Wrapped(Box::new(refusal.clone()))));
    assert_eq!(guard::refusal(&wrapped), Some(&refusal));
    assert!(guard::chain(&wrapped).starts_with("dns error: dns error: 127.0.0.1 is a loopback"));
    let other = Wrapped("connection refused".into());
    assert_eq!(guard::refusal(&other), None);
}
