//! The circuit breaker's ConfigMap against a mocked API server: a controller that starts with the
//! ConfigMap present opens its breaker before any DELETE, one that finds none closes it, the
//! leader writes a trip (and its Event), and the ConfigMap's deletion releases the breaker.

use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube_retention_apimock::{ApiServer, Received};
use kube_retention_io::breaker::BreakerMetrics;
use kube_retention_io::breaker::store::{self, Store};
use kube_retention_io::breaker::{Breaker, Position, Trip};
use serde_json::{Value, json};
use tokio::sync::watch;

const NAME: &str = "kube-retention-controller-circuit-breaker";
const PATH: &str = "/api/v1/namespaces/kube-retention/configmaps";
const MINUTE: Duration = Duration::from_secs(60);

/// A breaker of `limit` per minute and its store, leading or not, against a mocked API server.
fn start(limit: u32, leading: bool) -> (Breaker, ApiServer, watch::Sender<bool>) {
    let (client, server) = kube_retention_apimock::pair();
    let breaker = Breaker::new(limit, MINUTE, kube_retention_io::clock::Clock::System);
    let (leader, leadership) = watch::channel(leading);
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let store = Store {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        namespace: "kube-retention".into(),
        name: store::name_for("kube-retention-controller"),
        breaker: breaker.clone(),
        leadership,
        metrics: BreakerMetrics::default(),
    };
    tokio::spawn(store.run(limit, MINUTE));
    (breaker, server, leader)
}

fn config_map_list(items: Vec<Value>) -> Value {
    json!({"kind": "ConfigMapList", "apiVersion": "v1",
           "metadata": {"resourceVersion": "10"}, "items": items})
}

fn stored() -> Value {
    let trip = Trip {
        at: "2026-11-25T10:00:00Z".parse().unwrap(),
        limit: 200,
        window: MINUTE,
    };
    let mut config_map = serde_json::to_value(store::config_map(NAME, &trip)).unwrap();
    config_map["metadata"]["namespace"] = json!("kube-retention");
    config_map["metadata"]["resourceVersion"] = json!("9");
    config_map
}

/// The store's LIST of its one ConfigMap, by name.
async fn list(server: &mut ApiServer) -> Received {
    let list = server.next().await.expect("the LIST");
    assert_eq!(list.method, "GET");
    assert_eq!(list.path, PATH);
    assert!(
        list.query
            .contains(&format!("fieldSelector=metadata.name%3D{NAME}")),
        "{}",
        list.line()
    );
    assert!(!list.query.contains("watch=true"), "{}", list.line());
    list
}

#[tokio::test(start_paused = true)]
async fn a_controller_starting_with_the_configmap_present_opens_its_breaker_first() {
    let (breaker, mut server, _leader) = start(200, true);
    assert!(
        !breaker.admit(),
        "nothing goes before the stored state is read"
    );
    list(&mut server)
        .await
        .reply(200, &config_map_list(vec![stored()]));
    let watch = server.next().await.expect("the WATCH");
    assert!(watch.query.contains("watch=true"), "{}", watch.line());
    let Position::Open(trip) = breaker.position() else {
        panic!("open after reading the ConfigMap");
    };
    assert_eq!(trip.at.to_string(), "2026-11-25T10:00:00Z");
    assert_eq!(trip.limit, 200);
    assert!(!breaker.admit());

    // The admin deletes the ConfigMap: released.
    let deleted = json!({"type": "DELETED", "object": stored()});
    let stream = format!("{deleted}\n");
    watch.reply_raw(200, stream.into_bytes());
    let next = server.next().await.expect("the watch again");
    assert!(next.query.contains("watch=true"), "{}", next.line());
    assert_eq!(breaker.position(), Position::Closed);
    assert!(breaker.admit());
}

#[tokio::test(start_paused = true)]
async fn a_controller_that_finds_no_configmap_deletes_and_the_leader_writes_a_trip() {
    let (breaker, mut server, _leader) = start(1, true);
    list(&mut server)
        .await
        .reply(200, &config_map_list(Vec::new()));
    let watch = server.next().await.expect("the WATCH");
    assert!(watch.query.contains("watch=true"), "{}", watch.line());
    assert_eq!(breaker.position(), Position::Closed);
    assert!(breaker.admit());
    assert!(!breaker.admit(), "the second within a minute opens it");

    let create = server.next().await.expect("the ConfigMap written");
    assert_eq!(create.line(), format!("POST {PATH}"));
    assert_eq!(create.body["metadata"]["name"], NAME);
    assert_eq!(create.body["data"]["limit"], "1");
    assert_eq!(create.body["data"]["window"], "1m");
    let message = create.body["data"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("more than 1 deletions within 1m: no deletion is sent"),
        "{message}"
    );
    let mut written = create.body.clone();
    written["metadata"]["uid"] = json!("uid-breaker");
    create.reply(201, &written);
    let event = server.next().await.expect("the Event");
    assert_eq!(
        event.line(),
        "POST /apis/events.k8s.io/v1/namespaces/kube-retention/events"
    );
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reason"], "CircuitBreakerOpen");
    assert_eq!(event.body["regarding"]["name"], NAME);
    assert_eq!(event.body["note"], message);
    let body = event.body.clone();
    event.reply(201, &body);
    drop(watch);
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_nothing_and_a_failed_write_is_tried_again() {
    let (breaker, mut server, leader) = start(1, false);
    list(&mut server)
        .await
        .reply(200, &config_map_list(Vec::new()));
    let _watch = server.next().await.expect("the WATCH");
    breaker.open(Trip {
        at: "2026-11-25T10:00:00Z".parse().unwrap(),
        limit: 1,
        window: MINUTE,
    });
    assert!(
        server
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "a follower does not write"
    );
    leader.send(true).unwrap();
    let create = server
        .next()
        .await
        .expect("the leader's write, at the next retry");
    assert_eq!(create.line(), format!("POST {PATH}"));
    create.refuse(503, "etcd is unhappy");
    let again = server.next().await.expect("written again");
    assert_eq!(again.line(), format!("POST {PATH}"));
    again.refuse(409, "configmaps \"...\" already exists");
    assert!(
        server
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "already there: no Event, nothing more"
    );
}
