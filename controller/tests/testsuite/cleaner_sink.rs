//! CloudEvent delivery against local HTTP servers: retried with backoff until the sink takes
//! it; given up saying only that delivery failed — no status, no body, the same for a closed
//! port as for one that never answers. The sink policy's enforcement when connecting is in
//! `cleaner_sink_policy.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_retention_common::sink_policy::{Rule, SinkPolicy};
use kube_retention_sinks::{Sender, Undelivered};
use tokio::net::TcpListener;

use crate::sink_support;

use sink_support::{Answer, allowing, event, quick, serve};

#[tokio::test]
async fn a_sink_that_recovers_gets_the_event_after_retries() {
    let sink = serve("127.0.0.2", Answer::FailFirst(2)).await;
    let sender = Sender::new(allowing(&["127.0.0.2/32"]));
    sender
        .deliver(&sink.url, event(), &quick(5))
        .await
        .expect("delivered");
    assert_eq!(sink.requests(), 3);
}

#[tokio::test]
async fn a_sink_that_stays_down_is_given_up_saying_nothing_of_its_answers() {
    let sink = serve("127.0.0.2", Answer::FailFirst(u32::MAX)).await;
    let sender = Sender::new(allowing(&["127.0.0.2/32"]));
    let undelivered = sender
        .deliver(&sink.url, event(), &quick(3))
        .await
        .expect_err("not delivered");
    assert_eq!(sink.requests(), 3);
    assert_eq!(undelivered, Undelivered::Failed { attempts: 3 });
    let note = undelivered.note(&sink.url);
    assert_eq!(
        note,
        format!(
            "CloudEvent to {} not delivered: delivery failed after 3 attempts",
            sink.url
        )
    );
    // The URL is taken out first: its random port may itself contain "503".
    let said = note.replace(&sink.url, "");
    for echoed in ["503", "Unavailable", "internal-secret", "answered"] {
        assert!(!said.contains(echoed), "{note}");
    }
}

#[tokio::test]
async fn a_closed_port_and_a_silent_one_fail_alike_and_take_as_long() {
    let allowed = allowing(&["127.0.0.2/32"]);
    let sender = Sender::new(allowed);
    let closed = {
        let listener = TcpListener::bind("127.0.0.2:0").await.expect("a port");
        format!("http://{}/", listener.local_addr().expect("an address"))
    };
    let silent = serve("127.0.0.2", Answer::Never).await;
    let delivery = quick(2);
    let mut notes = Vec::new();
    for url in [&closed, &silent.url] {
        let started = Instant::now();
        let undelivered = sender
            .deliver(url, event(), &delivery)
            .await
            .expect_err("not delivered");
        let took = started.elapsed();
        assert_eq!(undelivered, Undelivered::Failed { attempts: 2 }, "{url}");
        assert!(took >= delivery.timeout * 2, "{url} failed after {took:?}");
        notes.push(undelivered.note("the sink"));
    }
    assert_eq!(notes[0], notes[1]);
}

#[tokio::test]
async fn an_https_sink_is_judged_like_an_http_one() {
    let sender = Sender::new(Arc::new(SinkPolicy::default()));
    let refused = sender
        .deliver("https://[::1]:9/", event(), &quick(1))
        .await
        .expect_err("refused");
    let Undelivered::Refused(refusal) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(refusal.rule, Rule::Loopback);
    // Allowed, it is connected to: TLS to a plain HTTP server fails like any failure.
    let plain = serve("127.0.0.2", Answer::FailFirst(0)).await;
    let https = plain.url.replace("http://", "https://");
    let sender = Sender::new(allowing(&["127.0.0.2/32"]));
    let undelivered = sender
        .deliver(&https, event(), &quick(1))
        .await
        .expect_err("no TLS there");
    assert_eq!(undelivered, Undelivered::Failed { attempts: 1 });
    assert_eq!(plain.accepted(), 1);
}

#[test]
fn the_notes_name_the_rule_or_the_failure_and_nothing_the_sink_said() {
    let refusal = SinkPolicy::default()
        .check_url("http://169.254.169.254/latest/meta-data/")
        .expect_err("the metadata service");
    assert_eq!(
        Undelivered::Refused(refusal).note("http://169.254.169.254/latest/meta-data/"),
        "CloudEvent to http://169.254.169.254/latest/meta-data/ refused by the sink policy: \
         169.254.169.254 is the cloud instance metadata service (AWS, GCP, Azure, Oracle, \
         DigitalOcean, OpenStack, Hetzner, Akamai, IBM)"
    );
    assert_eq!(
        Undelivered::Failed { attempts: 8 }.note("http://sink.example/"),
        "CloudEvent to http://sink.example/ not delivered: delivery failed after 8 attempts"
    );
}

#[tokio::test]
async fn a_failed_attempt_lasts_its_whole_timeout() {
    let sink = serve("127.0.0.2", Answer::FailFirst(u32::MAX)).await;
    let sender = Sender::new(allowing(&["127.0.0.2/32"]));
    let delivery = quick(1);
    let started = Instant::now();
    sender
        .deliver(&sink.url, event(), &delivery)
        .await
        .expect_err("not delivered");
    assert!(started.elapsed() >= delivery.timeout);
    assert!(started.elapsed() < delivery.timeout + Duration::from_secs(2));
}
