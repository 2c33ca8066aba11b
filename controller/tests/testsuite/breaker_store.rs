//! The circuit breakers' ConfigMaps against a mocked API server: a controller that starts with
//! them present opens its breakers — the cluster's, and each namespace the second names —
//! before any DELETE (none goes until both are read), one that finds none closes them, the
//! leader writes a trip (the cluster's ConfigMap created, a namespace's key added, and the
//! Warning Event), and a ConfigMap's deletion, or a namespace's key's removal, releases it.

use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube_retention_apimock::{ApiServer, Received};
use kube_retention_common::breaker::NamespaceTrip;
use kube_retention_io::breaker::store::{self, Store};
use kube_retention_io::breaker::{Breaker, BreakerMetrics, Limit, Position, Trip};
use kube_retention_io::clock::Clock;
use serde_json::{Value, json};
use tokio::sync::watch;

const NAME: &str = "kube-retention-controller-circuit-breaker";
const NAMESPACES: &str = "kube-retention-controller-circuit-breaker-namespaces";
const PATH: &str = "/api/v1/namespaces/kube-retention/configmaps";
const MINUTE: Duration = Duration::from_secs(60);

fn limit(deletions: u32) -> Limit {
    Limit {
        deletions,
        window: MINUTE,
    }
}

/// Breakers of `cluster` and `per_namespace` deletions a minute and their store, leading or
/// not, against a mocked API server.
fn start(
    cluster: u32,
    per_namespace: u32,
    leading: bool,
) -> (Breaker, ApiServer, watch::Sender<bool>) {
    let (client, server) = kube_retention_apimock::pair();
    let (cluster, per_namespace) = (limit(cluster), limit(per_namespace));
    let breaker = Breaker::new(cluster, per_namespace, Clock::System);
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
        namespaces_name: store::namespaces_name_for("kube-retention-controller"),
        breaker: breaker.clone(),
        leadership,
        metrics: BreakerMetrics::default(),
    };
    tokio::spawn(store.run(cluster, per_namespace));
    (breaker, server, leader)
}

fn config_map_list(items: Vec<Value>) -> Value {
    json!({"kind": "ConfigMapList", "apiVersion": "v1",
           "metadata": {"resourceVersion": "10"}, "items": items})
}

fn stored() -> Value {
    let trip = Trip::of_deletions("2026-11-25T10:00:00Z".parse().unwrap(), 200, MINUTE);
    let mut config_map = serde_json::to_value(store::config_map(NAME, &trip)).unwrap();
    config_map["metadata"]["namespace"] = json!("kube-retention");
    config_map["metadata"]["resourceVersion"] = json!("9");
    config_map
}

fn namespaces_stored(namespaces: &[&str]) -> Value {
    let trip = NamespaceTrip {
        tripped_at: "2026-11-25T10:00:00Z".into(),
        limit: 50,
        window: "1m".into(),
    };
    let data: serde_json::Map<String, Value> = namespaces
        .iter()
        .map(|namespace| ((*namespace).to_owned(), json!(trip.encode())))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": NAMESPACES, "namespace": "kube-retention", "resourceVersion": "11"},
           "data": data})
}

/// Which ConfigMap a request watches or lists, by its field selector.
fn of(request: &Received) -> &'static str {
    match request
        .query
        .contains(&format!("fieldSelector=metadata.name%3D{NAMESPACES}"))
    {
        true => NAMESPACES,
        false
            if request
                .query
                .contains(&format!("fieldSelector=metadata.name%3D{NAME}")) =>
        {
            NAME
        }
        false => panic!("neither ConfigMap: {}", request.line()),
    }
}

/// The next request for `name` among those of both watches; the other's waits in `other`.
async fn next_of(server: &mut ApiServer, name: &str, other: &mut Vec<Received>) -> Received {
    if let Some(index) = other.iter().position(|request| of(request) == name) {
        return other.remove(index);
    }
    loop {
        let request = server.next().await.expect("a request");
        if of(&request) == name {
            return request;
        }
        other.push(request);
    }
}

fn is_list(request: &Received) -> bool {
    request.method == "GET" && request.path == PATH && !request.query.contains("watch=true")
}

#[tokio::test(start_paused = true)]
async fn a_controller_starting_with_both_configmaps_present_opens_its_breakers_first() {
    let (breaker, mut server, _leader) = start(200, 50, true);
    assert!(
        !breaker.admit("team-b"),
        "nothing goes before the stored state is read"
    );
    let mut other = Vec::new();
    let list = next_of(&mut server, NAME, &mut other).await;
    assert!(is_list(&list), "{}", list.line());
    list.reply(200, &config_map_list(vec![stored()]));
    let cluster_watch = next_of(&mut server, NAME, &mut other).await;
    assert!(cluster_watch.query.contains("watch=true"));
    let Position::Open(trip) = breaker.position() else {
        panic!("open after reading the ConfigMap");
    };
    assert_eq!(trip.at.to_string(), "2026-11-25T10:00:00Z");
    assert_eq!(trip.limit, 200);

    let list = next_of(&mut server, NAMESPACES, &mut other).await;
    assert!(is_list(&list), "{}", list.line());
    list.reply(200, &config_map_list(vec![namespaces_stored(&["team-a"])]));
    let namespaces_watch = next_of(&mut server, NAMESPACES, &mut other).await;
    assert!(namespaces_watch.query.contains("watch=true"));
    let Position::Open(trip) = breaker.namespace_position("team-a") else {
        panic!("team-a's breaker open after reading its key");
    };
    assert_eq!(trip.limit, 50);
    assert!(!breaker.admit("team-b"), "the cluster's holds everyone");

    // The admin deletes the cluster's ConfigMap: every namespace but team-a deletes again.
    let deleted = json!({"type": "DELETED", "object": stored()});
    cluster_watch.reply_raw(200, format!("{deleted}\n").into_bytes());
    let again = next_of(&mut server, NAME, &mut other).await;
    assert!(again.query.contains("watch=true"), "{}", again.line());
    assert_eq!(breaker.position(), Position::Closed);
    assert!(breaker.admit("team-b"));
    assert!(!breaker.admit("team-a"), "its own breaker still holds it");

    // The admin removes team-a's key: released.
    let modified = json!({"type": "MODIFIED", "object": namespaces_stored(&[])});
    namespaces_watch.reply_raw(200, format!("{modified}\n").into_bytes());
    let again = next_of(&mut server, NAMESPACES, &mut other).await;
    assert!(again.query.contains("watch=true"), "{}", again.line());
    assert_eq!(breaker.namespace_position("team-a"), Position::Closed);
    assert!(breaker.admit("team-a"));
}

#[tokio::test(start_paused = true)]
async fn nothing_goes_until_the_namespaces_configmap_is_read_too() {
    let (breaker, mut server, _leader) = start(200, 50, true);
    let mut other = Vec::new();
    let list = next_of(&mut server, NAME, &mut other).await;
    list.reply(200, &config_map_list(Vec::new()));
    let _cluster_watch = next_of(&mut server, NAME, &mut other).await;
    let namespaces_list = next_of(&mut server, NAMESPACES, &mut other).await;
    assert_eq!(
        breaker.position(),
        Position::Unknown,
        "the cluster's read, not the namespaces'"
    );
    assert!(!breaker.admit("team-a"));
    namespaces_list.reply(200, &config_map_list(vec![namespaces_stored(&["team-a"])]));
    let _namespaces_watch = next_of(&mut server, NAMESPACES, &mut other).await;
    assert_eq!(breaker.position(), Position::Closed);
    assert!(!breaker.admit("team-a"), "a restart keeps team-a held");
    assert!(breaker.admit("team-b"));
}

/// Both lists answered empty; the watches, open, returned.
async fn read_empty(server: &mut ApiServer) -> Vec<Received> {
    let mut other = Vec::new();
    for name in [NAME, NAMESPACES] {
        let list = next_of(server, name, &mut other).await;
        list.reply(200, &config_map_list(Vec::new()));
        let watch = next_of(server, name, &mut other).await;
        assert!(watch.query.contains("watch=true"), "{}", watch.line());
        other.push(watch);
    }
    other
}

#[tokio::test(start_paused = true)]
async fn the_leader_writes_a_namespaces_trip_as_a_key_creating_the_configmap() {
    let (breaker, mut server, _leader) = start(200, 1, true);
    let _watches = read_empty(&mut server).await;
    assert_eq!(breaker.position(), Position::Closed);
    assert!(breaker.admit("team-a"));
    assert!(
        !breaker.admit("team-a"),
        "the second within a minute opens it"
    );
    assert!(breaker.admit("team-b"), "only team-a's");

    let patch = server.next().await.expect("the key written");
    assert_eq!(patch.line(), format!("PATCH {PATH}/{NAMESPACES}"));
    let value = patch.body["data"]["team-a"].as_str().unwrap().to_owned();
    let written = NamespaceTrip::decode(&value).expect("a trip");
    assert_eq!((written.limit, written.window.as_str()), (1, "1m"));
    patch.refuse(404, "configmaps \"...\" not found");
    let create = server.next().await.expect("the ConfigMap created");
    assert_eq!(create.line(), format!("POST {PATH}"));
    assert_eq!(create.body["metadata"]["name"], NAMESPACES);
    assert_eq!(create.body["data"]["team-a"], value);
    let mut body = create.body.clone();
    body["metadata"]["uid"] = json!("uid-namespaces");
    create.reply(201, &body);
    let event = server.next().await.expect("the Event");
    assert_eq!(
        event.line(),
        "POST /apis/events.k8s.io/v1/namespaces/kube-retention/events"
    );
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reason"], "CircuitBreakerOpen");
    assert_eq!(event.body["regarding"]["name"], NAMESPACES);
    let note = event.body["note"].as_str().unwrap().to_owned();
    assert!(
        note.starts_with("more than 1 deletions in namespace team-a within 1m"),
        "{note}"
    );
    let body = event.body.clone();
    event.reply(201, &body);
    assert!(
        server
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "written once, not again while its watch is awaited"
    );
}

#[tokio::test(start_paused = true)]
async fn the_leader_writes_the_clusters_trip_and_its_event() {
    let (breaker, mut server, _leader) = start(1, 100, true);
    let _watches = read_empty(&mut server).await;
    assert!(breaker.admit("a"));
    assert!(
        !breaker.admit("b"),
        "the second within a minute opens the cluster's"
    );

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
    assert_eq!(event.body["regarding"]["name"], NAME);
    assert_eq!(event.body["note"], message);
    let body = event.body.clone();
    event.reply(201, &body);
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_nothing_and_a_failed_write_is_tried_again() {
    let (breaker, mut server, leader) = start(1, 100, false);
    let _watches = read_empty(&mut server).await;
    breaker.open(Trip::of_deletions(
        "2026-11-25T10:00:00Z".parse().unwrap(),
        1,
        MINUTE,
    ));
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
