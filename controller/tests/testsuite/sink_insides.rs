//! The cluster's insides learned for the sink policy (`sinks::cluster`), fed by a mocked API
//! server: a ServiceCIDR, a Node and an API server EndpointSlice added, changed and deleted
//! change what the guard refuses when it connects — a local sink on the address counts every
//! connection — with the exact requests each kind's watch sends; senders wait until every kind
//! has been heard from; a kind that is forbidden or not served leaves the others working, is
//! counted, and is tried again. Loopback stands in for the cluster's addresses: the admin's
//! policy re-opens 127.0.0.0/8, and what is learned is more specific.

use std::net::IpAddr;
use std::time::Duration;

use kube_retention_common::sink_policy::{Inside, SinkPolicy};
use kube_retention_sinks::cluster::{Source, UNAVAILABLE_RETRY};
use kube_retention_sinks::{SharedPolicy, Undelivered};
use serde_json::Value;

use crate::insides_support;
use crate::sink_support;

use insides_support::{Cluster, api_slice, event, gone, list_line, node, service_cidr, watch_line};
use sink_support::{Answer, LocalSink, quick, serve};

/// The admin's policy: loopback re-opened, so that only what is learned refuses it.
fn loopback_allowed() -> SinkPolicy {
    SinkPolicy::from_flags(
        &["https".into(), "http".into()],
        &["127.0.0.0/8".into()],
        &[],
    )
    .expect("a policy")
}

/// Delivers to `sink` through `policy`: `None` when delivered, else the Event's note.
async fn deliver(policy: &SharedPolicy, sink: &LocalSink) -> Option<String> {
    let sender = kube_retention_sinks::Sender::new(policy.clone());
    match sender
        .deliver(&sink.url, sink_support::event(), &quick(1))
        .await
    {
        Ok(()) => None,
        Err(undelivered @ Undelivered::Refused(_)) => Some(undelivered.note(&sink.url)),
        Err(other) => panic!("neither delivered nor refused: {other:?}"),
    }
}

/// Every kind listed empty, its watch then held open but `driven`'s.
async fn listed_empty(cluster: &mut Cluster, driven: Source) {
    assert!(!cluster.policy.is_settled(), "nothing heard yet");
    for source in Source::ALL {
        cluster.list(source, Vec::new()).await;
    }
    for source in Source::ALL {
        if source != driven {
            cluster.hold(source).await;
        }
    }
    tokio::time::timeout(Duration::from_secs(10), cluster.policy.settled())
        .await
        .expect("settled once every kind is listed");
}

/// What the guard says of `sink` with the policy in force after each update of `driven`:
/// checked by hand between the updates, since an update's effect is seen once the next
/// request for its kind comes.
async fn refused_between_updates(
    driven: Source,
    objects: [Value; 3],
    why: Inside,
    first_net: &str,
    second_net: &str,
) {
    let first = serve("127.0.8.1", Answer::FailFirst(0)).await;
    let second = serve("127.0.9.1", Answer::FailFirst(0)).await;
    let mut cluster = Cluster::start(loopback_allowed());
    listed_empty(&mut cluster, driven).await;
    assert_eq!(deliver(&cluster.policy, &first).await, None);
    let [added, changed, deleted] = objects;

    cluster.events(driven, &[event("ADDED", added)]).await;
    let next = cluster.next(driven).await;
    assert_eq!(
        deliver(&cluster.policy, &first).await,
        Some(format!(
            "CloudEvent to {} refused by the sink policy: 127.0.8.1 is in {first_net}, {}",
            first.url,
            why.why()
        ))
    );
    assert_eq!(deliver(&cluster.policy, &second).await, None);
    assert_eq!(cluster.metrics.learned(why), 1);

    reply(next, &[event("MODIFIED", changed)]);
    let next = cluster.next(driven).await;
    assert_eq!(deliver(&cluster.policy, &first).await, None);
    assert_eq!(
        deliver(&cluster.policy, &second).await,
        Some(format!(
            "CloudEvent to {} refused by the sink policy: 127.0.9.1 is in {second_net}, {}",
            second.url,
            why.why()
        ))
    );

    reply(next, &[event("DELETED", deleted)]);
    cluster.hold(driven).await;
    assert_eq!(deliver(&cluster.policy, &second).await, None);
    assert_eq!(cluster.metrics.learned(why), 0);
    // Delivered twice each, refused once each: no connection for a refusal.
    assert_eq!((first.accepted(), second.accepted()), (2, 2));
    let mut expected = vec![list_line(driven)];
    expected.extend([1, 2, 3, 4].map(|version| watch_line(driven, version)));
    assert_eq!(cluster.lines(driven), expected);
    for other in Source::ALL.into_iter().filter(|source| *source != driven) {
        assert_eq!(
            cluster.lines(other),
            [list_line(other), watch_line(other, 1)]
        );
    }
    assert!(cluster.quiet_for(Duration::from_millis(300)).await);
}

fn reply(request: kube_retention_apimock::Received, events: &[Value]) {
    assert!(request.query.contains("watch=true"), "{}", request.line());
    let body: String = events.iter().map(|event| format!("{event}\n")).collect();
    request.reply_raw(200, body.into_bytes());
}

#[tokio::test]
async fn a_service_cidr_added_changed_and_deleted_is_refused_while_it_exists() {
    refused_between_updates(
        Source::ServiceCidrs,
        [
            service_cidr("extra", 2, &["127.0.8.0/24"]),
            service_cidr("extra", 3, &["127.0.9.0/24"]),
            service_cidr("extra", 4, &["127.0.9.0/24"]),
        ],
        Inside::ServiceCidr,
        "127.0.8.0/24",
        "127.0.9.0/24",
    )
    .await;
}

#[tokio::test]
async fn a_node_added_changed_and_deleted_is_refused_while_it_exists() {
    refused_between_updates(
        Source::Nodes,
        [
            node("worker", 2, "10.244.1.0/24", "127.0.8.1"),
            node("worker", 3, "10.244.1.0/24", "127.0.9.1"),
            node("worker", 4, "10.244.1.0/24", "127.0.9.1"),
        ],
        Inside::NodeAddress,
        "127.0.8.1/32",
        "127.0.9.1/32",
    )
    .await;
}

#[tokio::test]
async fn an_api_server_endpoint_added_changed_and_deleted_is_refused_while_it_exists() {
    refused_between_updates(
        Source::ApiServerEndpoints,
        [
            api_slice("kubernetes", 2, &["127.0.8.1"]),
            api_slice("kubernetes", 3, &["127.0.9.1"]),
            api_slice("kubernetes", 4, &["127.0.9.1"]),
        ],
        Inside::ApiServerEndpoint,
        "127.0.8.1/32",
        "127.0.9.1/32",
    )
    .await;
}

fn refused(policy: &SharedPolicy, address: &str) -> bool {
    let address: IpAddr = address.parse().expect("an address");
    policy.load().check_address(address).is_err()
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_or_unserved_kind_leaves_the_rest_working_and_is_tried_again() {
    let mut cluster = Cluster::start(loopback_allowed());
    let started = tokio::time::Instant::now();
    cluster
        .next(Source::ServiceCidrs)
        .await
        .refuse(404, "the server could not find the requested resource");
    cluster
        .list(
            Source::Nodes,
            vec![node("worker", 1, "127.0.10.0/24", "127.0.9.1")],
        )
        .await;
    cluster
        .next(Source::ApiServerEndpoints)
        .await
        .refuse(403, "endpointslices.discovery.k8s.io is forbidden");
    // The node's watch ends with 410 Gone: the watcher lists afresh, and the node is gone.
    cluster.events(Source::Nodes, &[gone()]).await;
    cluster.policy.settled().await;
    assert!(refused(&cluster.policy, "127.0.9.1"), "the node's address");
    assert!(refused(&cluster.policy, "127.0.10.7"), "its pod CIDR");
    assert!(!refused(&cluster.policy, "127.0.8.1"));
    assert!(
        refused(&cluster.policy, "169.254.169.254"),
        "the static defaults"
    );
    let errors = |kind, reason| cluster.metrics.watch_errors(kind, reason);
    assert_eq!(errors("ServiceCIDR", "not_served"), 1);
    assert_eq!(errors("EndpointSlice", "forbidden"), 1);
    assert_eq!(cluster.metrics.learned(Inside::NodeAddress), 1);

    // Listed again once the 410 is taken in.
    cluster.list(Source::Nodes, Vec::new()).await;
    assert_eq!(cluster.metrics.watch_errors("Node", "failed"), 1, "the 410");
    cluster.hold(Source::Nodes).await;
    assert!(
        !refused(&cluster.policy, "127.0.9.1"),
        "listed afresh without it"
    );
    assert_eq!(cluster.metrics.learned(Inside::NodeAddress), 0);

    let retried = cluster.next(Source::ServiceCidrs).await;
    assert!(
        started.elapsed() >= UNAVAILABLE_RETRY,
        "{:?}",
        started.elapsed()
    );
    let cidrs = vec![service_cidr("kubernetes", 1, &["127.0.8.0/24"])];
    retried.reply(200, &insides_support::list(Source::ServiceCidrs, cidrs));
    cluster.hold(Source::ServiceCidrs).await;
    let slices = vec![api_slice("kubernetes", 1, &["127.0.11.1"])];
    cluster.list(Source::ApiServerEndpoints, slices).await;
    cluster.hold(Source::ApiServerEndpoints).await;
    assert!(
        refused(&cluster.policy, "127.0.8.1"),
        "the service CIDR, once served"
    );
    assert!(
        refused(&cluster.policy, "127.0.11.1"),
        "the API server, once permitted"
    );
    assert_eq!(cluster.metrics.learned(Inside::ServiceCidr), 1);
    assert_eq!(cluster.metrics.learned(Inside::ApiServerEndpoint), 1);

    let services = Source::ServiceCidrs;
    let slices = Source::ApiServerEndpoints;
    let nodes = Source::Nodes;
    assert_eq!(
        cluster.lines(services),
        [
            list_line(services),
            list_line(services),
            watch_line(services, 1)
        ]
    );
    assert_eq!(
        cluster.lines(slices),
        [list_line(slices), list_line(slices), watch_line(slices, 1)]
    );
    assert_eq!(
        cluster.lines(nodes),
        [
            list_line(nodes),
            watch_line(nodes, 1),
            list_line(nodes),
            watch_line(nodes, 1)
        ]
    );
    assert!(cluster.quiet().await);
}
