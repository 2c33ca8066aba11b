//! Admission of a Cleaner's CloudEvent sink through the router: one the sink policy refuses is
//! admitted with a warning naming the rule, under the default policy and the admin's; a host
//! name is never judged by its addresses here; a scheme other than http(s) stays a denial.

use crate::support;

use std::sync::Arc;

use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_webhook::Context;
use serde_json::{Value, json};
use support::{FakeParents, review, send, send_to};

fn cleaner(sink: &str) -> Value {
    let object = json!({"apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": "preview-42", "namespace": "team-a"},
        "spec": {"ttl": "1h", "cloudEventSink": sink,
                 "targets": [{"name": "settings", "delete": true,
                              "reference": {"version": "v1", "kind": "ConfigMap", "name": "p42"}}]}});
    review(
        "retention.dev",
        "v1alpha1",
        "Cleaner",
        "CREATE",
        &object,
        None,
    )
}

fn warnings(body: &Value) -> Vec<String> {
    body["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|warning| warning.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_sink_on_loopback_is_admitted_with_a_warning_naming_the_rule() {
    let (_, body) = send("/validate", &cleaner("http://127.0.0.1:9/")).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(
        warnings(&body),
        [
            "spec.cloudEventSink: \"http://127.0.0.1:9/\": 127.0.0.1 is a loopback address: refused \
          by the sink policy; the controller will not deliver to it"
        ]
    );
}

#[tokio::test]
async fn every_spelling_of_a_denied_address_is_warned_about() {
    for (sink, rule) in [
        ("http://169.254.1.1/", "is a link-local address"),
        (
            "http://2130706433/",
            "2130706433 (127.0.0.1) is a loopback address",
        ),
        ("http://[::ffff:169.254.1.1]/", "is a link-local address"),
        ("https://localhost:8443/", "localhost is a loopback name"),
        // The clouds' metadata services: the sink policy's one table.
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254 is the cloud instance metadata service",
        ),
        (
            "http://[::ffff:169.254.169.254]/",
            "is the cloud instance metadata service",
        ),
        (
            "http://[fd00:ec2::254]/latest/meta-data/",
            "fd00:ec2::254 is AWS's instance metadata service over IPv6",
        ),
        (
            "http://168.63.129.16/machine?comp=goalstate",
            "168.63.129.16 is Azure's WireServer",
        ),
        (
            "http://0x646464c8/latest/meta-data/",
            "0x646464c8 (100.100.100.200) is Alibaba Cloud's instance metadata service",
        ),
        (
            "http://Metadata.Google.Internal./computeMetadata/v1/",
            "metadata.google.internal is the name of GCP's metadata server",
        ),
    ] {
        let (_, body) = send("/validate", &cleaner(sink)).await;
        assert_eq!(body["response"]["allowed"], true, "{body}");
        let said = warnings(&body);
        assert!(
            said.len() == 1 && said[0].contains(rule),
            "{sink}: {said:?}"
        );
    }
}

#[tokio::test]
async fn a_public_sink_or_a_host_name_is_admitted_without_a_warning() {
    for sink in [
        "https://events.example.com/hook",
        "http://sink.team-a.svc:8080/",
        "http://93.184.216.34/",
    ] {
        let (_, body) = send("/validate", &cleaner(sink)).await;
        assert_eq!(body["response"]["allowed"], true, "{body}");
        assert_eq!(warnings(&body), Vec::<String>::new(), "{sink}");
    }
}

#[tokio::test]
async fn the_admins_policy_decides_what_is_warned_about() {
    let strings = |values: &[&str]| {
        values
            .iter()
            .map(|value| (*value).to_owned())
            .collect::<Vec<_>>()
    };
    let policy = |allow: &[&str]| {
        SinkPolicy::from_flags(
            &strings(&["https"]),
            &strings(allow),
            &strings(&["10.96.0.0/12"]),
        )
        .unwrap()
    };
    let names = policy(&["*.events.example.com"]);
    // With a CIDR on the allow list, a name is left to the addresses it resolves to.
    let nets = policy(&["127.0.0.2/32", "*.events.example.com"]);
    for (policy, sink, warned) in [
        (&nets, "https://127.0.0.2:8443/", None),
        (&names, "https://a.events.example.com/", None),
        (
            &names,
            "https://events.example.com/",
            Some("events.example.com is not covered by --cloud-event-sink-allow"),
        ),
        (&nets, "https://events.example.com/", None),
        (
            &nets,
            "https://127.0.0.3/",
            Some("127.0.0.3 is a loopback address"),
        ),
        (
            &nets,
            "http://127.0.0.2/",
            Some("the scheme \"http\" is not one of https"),
        ),
        (
            &nets,
            "https://10.96.0.1/",
            Some("10.96.0.1 is in 10.96.0.0/12, denied by --cloud-event-sink-deny"),
        ),
    ] {
        let context =
            Context::new(Arc::new(FakeParents::with_fixtures())).with_sink_policy(policy.clone());
        let (_, body) = send_to(context, "/validate", &cleaner(sink)).await;
        assert_eq!(body["response"]["allowed"], true, "{body}");
        let said = warnings(&body);
        match warned {
            None => assert!(said.is_empty(), "{sink}: {said:?}"),
            Some(rule) => assert!(
                said.len() == 1 && said[0].contains(rule),
                "{sink}: {said:?}"
            ),
        }
    }
}

#[tokio::test]
async fn a_sink_that_is_not_http_is_still_denied() {
    let (_, body) = send("/validate", &cleaner("ftp://127.0.0.1/")).await;
    assert_eq!(body["response"]["allowed"], false, "{body}");
    let message = body["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.cloudEventSink"), "{message}");
}
