//! The ledger's lanes: a queue per namespace and sink served round robin, a failing sink backing
//! off without holding a slot, attempts bounded in all, per namespace and per sink, memory
//! bounded with the drops costing the longest queue — over generated interleavings — and, on
//! real sockets, issue 57's fifth reproduction: one tenant's sink on a closed port (or one that
//! never answers) neither delays nor drops another tenant's announcements, nor the admin's.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_sinks::ledger::{
    Item, Lanes, Ledger, LedgerMetrics, Limits, NAMESPACE_IN_FLIGHT, SinkLabels,
};
use kube_retention_sinks::{Delivery, Sender};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use proptest::prelude::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

fn limits(queued: usize) -> Limits {
    Limits {
        queued,
        in_flight: 4,
        per_namespace: 2,
        per_sink: 2,
        delivery: Delivery {
            attempts: 3,
            first_backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        },
    }
}

fn item(namespace: &str, sink: &str) -> Item {
    Item {
        namespace: Arc::from(namespace),
        sink: Arc::from(sink),
        label: Some(SinkLabels { sink: "policy" }),
        event: crate::sink_support::event(),
        attempts: 0,
        done: None,
    }
}

fn taken(lanes: &mut Lanes, now: Instant) -> Vec<String> {
    std::iter::from_fn(|| lanes.next(now))
        .map(|item| format!("{}:{}", item.namespace, item.sink))
        .collect()
}

#[test]
fn a_namespace_flooding_its_sink_takes_its_share_of_the_slots_and_no_more() {
    let now = Instant::now();
    let mut lanes = Lanes::new(limits(1_000));
    for _ in 0..200 {
        assert!(lanes.push(item("tenant-a", "http://a/")).is_none());
    }
    assert!(lanes.push(item("tenant-b", "http://b/")).is_none());
    let started = taken(&mut lanes, now);
    assert_eq!(
        started,
        [
            "tenant-a:http://a/",
            "tenant-b:http://b/",
            "tenant-a:http://a/"
        ],
        "tenant-a's two attempts, its share, and tenant-b's turn between"
    );
    assert_eq!(lanes.in_flight(), 3, "a slot is left for a third namespace");
}

#[test]
fn a_failed_attempt_frees_its_slot_and_its_sink_waits_out_the_timeout_and_a_backoff() {
    let start = Instant::now();
    let mut lanes = Lanes::new(limits(1_000));
    for name in ["http://down/", "http://down/", "http://up/"] {
        lanes.push(item("tenant-a", name));
    }
    lanes.push(item("tenant-b", "http://up-b/"));
    let first = lanes.next(start).expect("an attempt");
    assert_eq!(&*first.sink, "http://down/");
    // Refused at once (a closed port): the slot is free again at once...
    assert!(lanes.failed(first, start).is_none(), "tried again later");
    assert_eq!(lanes.in_flight(), 0);
    // ...and the other sinks' turns go, not the failed one's, until its timeout and a pause.
    let now = start + Duration::from_secs(1);
    let started = taken(&mut lanes, now);
    assert_eq!(started, ["tenant-a:http://up/", "tenant-b:http://up-b/"]);
    let wake = lanes.wake_at(now).expect("the down sink's next try");
    assert!(
        wake >= start + Duration::from_secs(11),
        "{:?}",
        wake - start
    );
    assert!(
        wake <= start + Duration::from_secs(12),
        "first pause at most doubled by its jitter"
    );
    assert!(lanes.next(wake - Duration::from_millis(1)).is_none());
}

#[test]
fn an_item_whose_attempts_are_spent_is_given_back_to_report() {
    let mut now = Instant::now();
    let mut lanes = Lanes::new(limits(10));
    lanes.push(item("tenant-a", "http://down/"));
    for attempt in 1..=3 {
        let taken = lanes.next(now).expect("its turn");
        let spent = lanes.failed(taken, now);
        assert_eq!(spent.is_some(), attempt == 3, "attempt {attempt}");
        now = lanes.wake_at(now).unwrap_or(now);
    }
    assert_eq!(
        (lanes.queued(), lanes.in_flight(), lanes.sinks()),
        (0, 0, 0)
    );
}

#[test]
fn past_the_bound_the_longest_queue_loses_its_oldest() {
    let mut lanes = Lanes::new(limits(10));
    for _ in 0..9 {
        assert!(lanes.push(item("tenant-a", "http://a/")).is_none());
    }
    assert!(lanes.push(item("tenant-b", "http://b/")).is_none());
    let dropped = lanes
        .push(item("tenant-b", "http://b/"))
        .expect("one over the bound");
    assert_eq!(&*dropped.namespace, "tenant-a", "the flood pays");
    assert_eq!(lanes.queued(), 10);
}

/// One step of a generated run.
#[derive(Debug, Clone)]
enum Step {
    Push {
        namespace: usize,
        sink: usize,
    },
    Next,
    /// The `index`th attempt under way ends: delivered, failed, or refused.
    End {
        index: usize,
        outcome: u8,
    },
    Wait {
        millis: u64,
    },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0usize..4, 0usize..4).prop_map(|(namespace, sink)| Step::Push { namespace, sink }),
        3 => Just(Step::Next),
        3 => (0usize..8, 0u8..3).prop_map(|(index, outcome)| Step::End { index, outcome }),
        1 => (0u64..30_000).prop_map(|millis| Step::Wait { millis }),
    ];
    proptest::collection::vec(step, 1..300)
}

proptest! {
    /// Whatever the interleaving: the bounds hold; a drop is of the longest queue; an attempt's
    /// end frees its slot whatever came of it; and a free slot never idles while a queue of a
    /// namespace and sink within their shares, at a sink that never failed, waits.
    #[test]
    fn the_lanes_keep_their_bounds_drop_from_the_longest_and_never_idle_a_slot(steps in steps()) {
        let limits = limits(12);
        let mut lanes = Lanes::new(limits.clone());
        let mut now = Instant::now();
        let mut under_way: Vec<(Item, Instant)> = Vec::new();
        let mut queued: HashMap<(String, String), usize> = HashMap::new();
        let mut failed_sinks: HashSet<String> = HashSet::new();
        for step in steps {
            match step {
                Step::Push { namespace, sink } => {
                    let key = (format!("ns-{namespace}"), format!("http://sink-{sink}/"));
                    *queued.entry(key.clone()).or_default() += 1;
                    if let Some(dropped) = lanes.push(item(&key.0, &key.1)) {
                        let dropped_key = (dropped.namespace.to_string(), dropped.sink.to_string());
                        let longest = queued.values().copied().max().unwrap_or(0);
                        let count = queued.get(&dropped_key).copied().unwrap_or(0);
                        prop_assert_eq!(count, longest, "{:?} dropped", dropped_key);
                        *queued.entry(dropped_key).or_default() -= 1;
                    }
                }
                Step::Next => match lanes.next(now) {
                    Some(item) => {
                        let key = (item.namespace.to_string(), item.sink.to_string());
                        *queued.entry(key).or_default() -= 1;
                        under_way.push((item, now));
                    }
                    None if under_way.len() < limits.in_flight => {
                        let mut busy_namespaces: HashMap<String, usize> = HashMap::new();
                        let mut busy_sinks: HashMap<String, usize> = HashMap::new();
                        for (item, _) in &under_way {
                            *busy_namespaces.entry(item.namespace.to_string()).or_default() += 1;
                            *busy_sinks.entry(item.sink.to_string()).or_default() += 1;
                        }
                        for ((namespace, sink), count) in &queued {
                            let idle = *count > 0
                                && busy_namespaces.get(namespace).copied().unwrap_or(0) < limits.per_namespace
                                && busy_sinks.get(sink).copied().unwrap_or(0) < limits.per_sink
                                && !failed_sinks.contains(sink);
                            prop_assert!(!idle, "{namespace} {sink} waits with a slot free");
                        }
                    }
                    None => {}
                },
                Step::End { index, outcome } => {
                    if under_way.is_empty() {
                        continue;
                    }
                    let (item, started) = under_way.remove(index % under_way.len());
                    let before = lanes.in_flight();
                    let key = (item.namespace.to_string(), item.sink.to_string());
                    match outcome {
                        0 => lanes.delivered(&item),
                        1 => {
                            failed_sinks.insert(key.1.clone());
                            if lanes.failed(item, started).is_none() {
                                *queued.entry(key).or_default() += 1;
                            }
                        }
                        _ => lanes.ended(&item),
                    }
                    prop_assert_eq!(lanes.in_flight(), before - 1, "the slot is free at once");
                }
                Step::Wait { millis } => now += Duration::from_millis(millis),
            }
            prop_assert!(lanes.queued() + lanes.in_flight() <= limits.queued);
            prop_assert_eq!(lanes.queued(), queued.values().sum::<usize>());
            prop_assert!(lanes.in_flight() <= limits.in_flight);
            prop_assert_eq!(lanes.in_flight(), under_way.len());
            let mut namespaces: HashMap<&str, usize> = HashMap::new();
            let mut sinks: HashMap<&str, usize> = HashMap::new();
            for (item, _) in &under_way {
                *namespaces.entry(&item.namespace).or_default() += 1;
                *sinks.entry(&item.sink).or_default() += 1;
            }
            prop_assert!(namespaces.values().all(|&busy| busy <= limits.per_namespace));
            prop_assert!(sinks.values().all(|&busy| busy <= limits.per_sink));
        }
    }
}

/// A sink on 127.0.0.2 that counts the CloudEvents it reads and answers 202, or never answers.
struct Counting {
    url: String,
    received: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Counting {
    async fn start(answers: bool) -> Self {
        let listener = TcpListener::bind(("127.0.0.2", 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let received = Arc::new(AtomicU32::new(0));
        let counted = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    let read = stream.read(&mut buffer).await.unwrap_or(0);
                    counted.fetch_add(u32::from(read > 0), Ordering::SeqCst);
                    if !answers {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    }
                    let answer =
                        "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    stream.write_all(answer.as_bytes()).await.ok();
                });
            }
        });
        Self {
            url: format!("http://{address}/"),
            received,
            task,
        }
    }

    fn received(&self) -> u32 {
        self.received.load(Ordering::SeqCst)
    }
}

/// An address on 127.0.0.2 where nothing listens: a connection is refused at once.
async fn closed_port() -> String {
    let listener = TcpListener::bind(("127.0.0.2", 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}/")
}

fn entry(namespace: &str, index: usize) -> Entry {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "namespace": namespace,
        "name": format!("job-{index}"), "uid": format!("{namespace}-{index}"), "reason": "ttl",
        "decidedBy": "RetentionPolicy jobs", "time": "2026-01-01T00:00:00Z"}))
    .unwrap()
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 30 s: {what}");
}

/// Tenant A's 200 deletions announced to `a_sink`, then tenant B's 20 to its working sink; the
/// admin's `--ledger-sink` is told of all 220, each delivered as `delivery` says. Answers B's
/// sink, the admin's, and the metrics.
async fn announce_past(a_sink: &str, delivery: Delivery) -> (Counting, Counting, LedgerMetrics) {
    let b_sink = Counting::start(true).await;
    let cluster_sink = Counting::start(true).await;
    let policy = SinkPolicy::from_flags(&["http".into()], &["127.0.0.2/32".into()], &[]).unwrap();
    let sender = Arc::new(Sender::new(Arc::new(policy)));
    let metrics = LedgerMetrics::default();
    let (ledger, _tasks) = Ledger::spawn(
        sender,
        Some(Arc::from(cluster_sink.url.as_str())),
        10_000,
        delivery,
        metrics.clone(),
    );
    let (a_sink, b_url): (Arc<str>, Arc<str>) = (Arc::from(a_sink), Arc::from(b_sink.url.as_str()));
    for index in 0..200 {
        ledger.announce(DELETED, &entry("tenant-a", index), Some(&a_sink), false);
    }
    for index in 0..20 {
        ledger.announce(DELETED, &entry("tenant-b", index), Some(&b_url), false);
    }
    until("tenant B's 20 and the admin's 220 delivered", || {
        b_sink.received() == 20 && cluster_sink.received() == 220
    })
    .await;
    drop(ledger);
    (b_sink, cluster_sink, metrics)
}

fn count(family: &Family<SinkLabels, Counter>, sink: &'static str) -> u64 {
    family.get_or_create(&SinkLabels { sink }).get()
}

/// Issue 57's fifth reproduction: after tenant A's 200 deletions to a closed port, every one of
/// tenant B's and of the admin's ledger events was dropped.
#[tokio::test]
async fn a_tenants_sink_on_a_closed_port_delays_and_drops_nobody_elses_events() {
    let closed = closed_port().await;
    let (_b, _cluster, metrics) = announce_past(&closed, Delivery::default()).await;
    assert_eq!(count(&metrics.dropped, "policy"), 0);
    assert_eq!(count(&metrics.dropped, "cluster"), 0);
    assert_eq!(count(&metrics.delivered, "cluster"), 220);
    assert_eq!(
        count(&metrics.delivered, "policy"),
        20,
        "tenant B's, none of A's"
    );
}

#[tokio::test]
async fn a_tenants_sink_that_never_answers_holds_its_own_share_of_slots_only() {
    let hanging = Counting::start(false).await;
    // Attempts given longer than the test waits: A's first ones hang for all of it.
    let patient = Delivery {
        timeout: Duration::from_secs(120),
        ..Delivery::default()
    };
    let (_b, _cluster, metrics) = announce_past(&hanging.url, patient).await;
    assert_eq!(
        hanging.received() as usize,
        NAMESPACE_IN_FLIGHT,
        "tenant A's first attempts still hang: B's and the admin's did not wait for them"
    );
    assert_eq!(count(&metrics.dropped, "policy"), 0);
    assert_eq!(count(&metrics.dropped, "cluster"), 0);
}

/// The Job `name` of `namespace`, as the API server answers its GET.
fn job_in(namespace: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                        "resourceVersion": "1"},
           "status": {"succeeded": 1}})
}

/// Archives (`archiveBeforeDelete`) to a sink that never answers hold at most their own
/// namespace's places: another namespace's archive is read and sent meanwhile.
#[tokio::test]
async fn a_namespaces_hanging_archive_sink_holds_its_own_places_only() {
    use kube::Api;
    use kube::api::ApiResource;
    use kube_retention_common::kinds::Resource;
    use kube_retention_io::lean::LeanObject;
    use kube_retention_sinks::ledger::archive::{Archived, PER_NAMESPACE};

    let hanging = Counting::start(false).await;
    let answering = Counting::start(true).await;
    let policy = SinkPolicy::from_flags(&["http".into()], &["127.0.0.2/32".into()], &[]).unwrap();
    let sender = Arc::new(Sender::new(Arc::new(policy)));
    let archiver = kube_retention_sinks::ledger::archive::Archiver::new(sender);
    let (client, mut api) = kube_retention_apimock::pair();
    let resource = Resource::new("batch", "v1", "Job", "jobs");
    let dynamic = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("batch", "v1", "Job"),
        "jobs",
    );
    let archive = |namespace: &'static str, name: String, sink: String| {
        let api: Api<LeanObject> = Api::namespaced_with(client.clone(), namespace, &dynamic);
        let (archiver, resource) = (archiver.clone(), resource.clone());
        tokio::spawn(async move {
            let uid = format!("uid-{name}");
            let entry = entry(namespace, 0);
            archiver
                .archive(&api, &resource, &name, (&uid, "1"), &sink, entry)
                .await
        })
    };
    let mut hung = Vec::new();
    for index in 0..PER_NAMESPACE + 3 {
        hung.push(archive(
            "tenant-a",
            format!("a-{index}"),
            hanging.url.clone(),
        ));
    }
    // Tenant A's places: that many GETs, then none while their sends hang.
    let mut gets = Vec::new();
    while let Some(get) = api.next_within(Duration::from_millis(500)).await {
        let name = get.path.rsplit('/').next().unwrap_or_default().to_owned();
        get.reply(200, &job_in("tenant-a", &name));
        gets.push(name);
    }
    assert_eq!(gets.len(), PER_NAMESPACE, "{gets:?}");
    // Tenant B's archive goes meanwhile.
    let other = archive("tenant-b", "b-0".into(), answering.url.clone());
    let get = api.next().await.expect("tenant B's GET");
    assert_eq!(get.path, "/apis/batch/v1/namespaces/tenant-b/jobs/b-0");
    get.reply(200, &job_in("tenant-b", "b-0"));
    assert!(matches!(other.await.unwrap(), Archived::Acknowledged));
    assert_eq!(answering.received(), 1);
    assert_eq!(hanging.received() as usize, PER_NAMESPACE);
    for task in hung {
        task.abort();
    }
}
