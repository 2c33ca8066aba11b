//! A sink's host name is a tenant's input, and resolving it must not outlive the attempt that
//! asked: with a nameserver that never answers, each attempt ends at its timeout and its lookup
//! with it — no query is sent for it afterwards, so nothing (no thread, no socket) is left
//! behind however many attempts a tenant's sink makes.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_runtime::sinks::guard::{
    NameServerConfig, ResolverConfig, ResolverOpts, resolver_lookup,
};
use kube_retention_runtime::sinks::{Attempted, Sender, event};
use tokio::net::UdpSocket;

/// A nameserver on 127.0.0.1 that reads every query and answers none; counts them.
async fn silent_nameserver() -> (u16, Arc<AtomicU32>, tokio::task::JoinHandle<()>) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = socket.local_addr().unwrap().port();
    let queries = Arc::new(AtomicU32::new(0));
    let counted = queries.clone();
    let task = tokio::spawn(async move {
        let mut buffer = [0u8; 1500];
        while socket.recv_from(&mut buffer).await.is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, queries, task)
}

#[tokio::test]
async fn a_lookup_that_never_answers_ends_with_its_attempt() {
    let (port, queries, server) = silent_nameserver().await;
    let mut nameserver = NameServerConfig::udp(IpAddr::V4(Ipv4Addr::LOCALHOST));
    for connection in &mut nameserver.connections {
        connection.port = port;
    }
    let config = ResolverConfig::from_name_servers(vec![nameserver]);
    // A lookup left running would ask again every 100 ms for 5 s.
    let mut options = ResolverOpts::default();
    options.timeout = Duration::from_millis(100);
    options.attempts = 50;
    let schemes = ["http".to_owned()];
    let allow = ["*.sink.example".to_owned()];
    let policy = Arc::new(SinkPolicy::from_flags(&schemes, &allow, &[]).unwrap());
    let sender = Arc::new(Sender::with_lookup(
        policy,
        resolver_lookup(config, options),
    ));
    let attempts: Vec<_> = (0..20)
        .map(|index| {
            let sender = sender.clone();
            tokio::spawn(async move {
                let sink = format!("http://sink-{index}.sink.example/");
                let event = event(
                    "t",
                    "id",
                    "/s",
                    serde_json::json!({}),
                    jiff::Timestamp::now(),
                )
                .unwrap();
                sender
                    .attempt(&sink, event, Duration::from_millis(400))
                    .await
            })
        })
        .collect();
    for attempt in attempts {
        let attempted = attempt.await.unwrap();
        assert!(matches!(attempted, Attempted::Failed(_)), "{attempted:?}");
    }
    let asked = queries.load(Ordering::SeqCst);
    assert!(
        asked >= 20,
        "each attempt's lookup asked the nameserver: {asked}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        queries.load(Ordering::SeqCst),
        asked,
        "no lookup went on asking after its attempt ended"
    );
    server.abort();
}
