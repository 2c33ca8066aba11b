//! The deletion ledger against a mocked API server and a local sink: with `archiveBeforeDelete`
//! the object is read, sent and acknowledged before its DELETE (a sink that fails holds the
//! DELETE back, a changed object is judged again, a gone one needs nothing); without it the
//! deletion is announced after the DELETE; a full queue drops and counts; and the state says who
//! decided, with which setting, and where the ledger goes.

use crate::support;
use crate::work_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::Registry;
use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_common::model::object_value;
use kube_retention_common::sink_policy::SinkPolicy;
use kube_retention_controller::executor::{Budget, Executor, Feedback, Parts, Settings};
use kube_retention_controller::metrics::Metrics;
use kube_retention_sinks::ledger::{Ledger, LedgerMetrics, SinkLabels};
use kube_retention_sinks::{Delivery, Sender};
use kube_retention_state::{Action, Failure, Ledgered};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use work_support::deletion;

const JOB: &str = "/apis/batch/v1/namespaces/team/jobs/done";

/// A sink on 127.0.0.2 answering each request with the next of `statuses` (the last one
/// again when they run out); keeps the `ce-type` and body of each request.
struct Sink {
    url: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    async fn start(statuses: &'static [&'static str]) -> Self {
        let listener = TcpListener::bind(("127.0.0.2", 0)).await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = received.clone();
        let task = tokio::spawn(async move {
            let mut answered = 0;
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = vec![0; 256 * 1024];
                let mut read = 0;
                // Headers, then the body its content-length says.
                loop {
                    let n = stream.read(&mut buffer[read..]).await.unwrap_or(0);
                    read += n;
                    let text = String::from_utf8_lossy(&buffer[..read]).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|line| {
                                let (name, value) = line.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= length || n == 0 {
                            let ty = head
                                .lines()
                                .find_map(|line| {
                                    let (name, value) = line.split_once(':')?;
                                    name.eq_ignore_ascii_case("ce-type")
                                        .then(|| value.trim().to_owned())
                                })
                                .unwrap_or_default();
                            let body = serde_json::from_str(body).unwrap_or(Value::Null);
                            kept.lock().unwrap().push((ty, body));
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let status = statuses[answered.min(statuses.len() - 1)];
                answered += 1;
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                stream.write_all(answer.as_bytes()).await.ok();
            }
        });
        Self {
            url,
            received,
            task,
        }
    }

    fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }
}

fn allowing_the_sink() -> Arc<Sender> {
    let schemes = ["http".to_owned()];
    let allow = ["127.0.0.2/32".to_owned()];
    let policy = SinkPolicy::from_flags(&schemes, &allow, &[]).unwrap();
    Arc::new(Sender::new(Arc::new(policy)))
}

fn quick() -> Delivery {
    Delivery {
        attempts: 1,
        first_backoff: Duration::from_millis(10),
        timeout: Duration::from_secs(2),
    }
}

struct Harness {
    server: kube_retention_apimock::ApiServer,
    executor: Executor,
    feedback: mpsc::UnboundedReceiver<Feedback>,
    ledger: LedgerMetrics,
}

fn harness(cluster_sink: Option<&str>, capacity: usize) -> (Harness, Ledger) {
    let (client, server) = kube_retention_apimock::pair();
    let (feedback_tx, feedback) = mpsc::unbounded_channel();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "test".into(),
            instance: None,
        },
    );
    let metrics = Metrics::default();
    let (ledger, _delivering) = Ledger::spawn(
        allowing_the_sink(),
        cluster_sink.map(Arc::from),
        capacity,
        quick(),
        metrics.ledger.clone(),
    );
    drop(_delivering);
    let (executor, _tasks) = Executor::spawn(Parts {
        client,
        settings: Settings {
            breaker: kube_retention_io::breaker::Breaker::off(),
            budget: Budget::unlimited(),
            propagation: PropagationPolicy::Background,
            concurrency: 1,
            events: false,
            event_window: Duration::ZERO,
        },
        metrics: metrics.clone(),
        recorder,
        feedback: feedback_tx,
        ledger: Some(ledger.clone()),
        clock: kube_retention_io::clock::Clock::System,
    });
    let harness = Harness {
        server,
        executor,
        feedback,
        ledger: metrics.ledger,
    };
    (harness, ledger)
}

fn ledgered(sink: Option<&str>, archive: bool) -> Action {
    let mut action = deletion("team", "done");
    if let Action::Delete { ledger, .. } = &mut action {
        *ledger = Some(Box::new(Ledgered {
            decided_by: "RetentionPolicy team/jobs".into(),
            setting: Some("ttlAfterSucceeded: 1h".into()),
            deadline: Some("2026-01-01T01:00:00Z".parse().unwrap()),
            sink: sink.map(Arc::from),
            archive,
        }));
    }
    action
}

fn job(resource_version: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "done", "namespace": "team", "uid": "uid",
                        "resourceVersion": resource_version},
           "status": {"succeeded": 1}})
}

/// No request within half a second (real time: the sinks are real sockets).
async fn quiet(server: &mut kube_retention_apimock::ApiServer) -> bool {
    server
        .next_within(Duration::from_millis(500))
        .await
        .is_none()
}

async fn feedback(harness: &mut Harness) -> Option<Feedback> {
    tokio::time::timeout(Duration::from_secs(10), harness.feedback.recv())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn an_archived_deletion_waits_for_the_sinks_acknowledgement() {
    let sink = Sink::start(&["503 Service Unavailable", "202 Accepted"]).await;
    let (mut harness, _ledger) = harness(None, 10);
    harness
        .executor
        .submit(ledgered(Some(&sink.url), true), Registry::builtin());
    let get = harness
        .server
        .next_within(Duration::from_secs(5))
        .await
        .expect("the GET");
    assert_eq!(get.line(), format!("GET {JOB}"));
    get.reply(200, &job("1"));
    match feedback(&mut harness).await {
        Some(Feedback::DeleteFailed {
            failure: Failure::Unavailable(message),
            ..
        }) => assert!(
            message.starts_with("archiveBeforeDelete: not deleted until the sink acknowledges it")
                && message.contains("delivery failed")
                && !message.replace(&sink.url, "").contains("503"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        quiet(&mut harness.server).await,
        "no DELETE while unarchived"
    );
    assert_eq!(harness.ledger.archive_failures.get(), 1);

    harness
        .executor
        .submit(ledgered(Some(&sink.url), true), Registry::builtin());
    harness.server.next().await.unwrap().reply(200, &job("1"));
    let delete = harness.server.next().await.unwrap();
    assert_eq!(delete.line(), format!("DELETE {JOB}"));
    assert_eq!(
        delete.body["preconditions"],
        json!({"uid": "uid", "resourceVersion": "1"})
    );
    delete.reply(200, &job("1"));
    let received = sink.received();
    assert_eq!(received.len(), 2, "{received:?}");
    let (ty, body) = &received[1];
    assert_eq!(ty, DELETED);
    let entry: Entry = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(
        (entry.kind.as_str(), entry.name.as_str(), entry.uid.as_str()),
        ("Job", "done", "uid")
    );
    assert_eq!(entry.decided_by, "RetentionPolicy team/jobs");
    assert_eq!(entry.setting.as_deref(), Some("ttlAfterSucceeded: 1h"));
    assert_eq!(entry.object.unwrap()["status"], json!({"succeeded": 1}));
    assert!(!entry.object_truncated);
    assert!(
        quiet(&mut harness.server).await,
        "nothing else is sent; the policy's sink is not told twice"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.received().len(), 2);
}

#[tokio::test]
async fn a_changed_object_is_not_archived_and_a_gone_one_needs_nothing() {
    let sink = Sink::start(&["202 Accepted"]).await;
    let (mut harness, _ledger) = harness(None, 10);
    harness
        .executor
        .submit(ledgered(Some(&sink.url), true), Registry::builtin());
    harness.server.next().await.unwrap().reply(200, &job("2"));
    assert!(matches!(
        feedback(&mut harness).await,
        Some(Feedback::DeleteFailed {
            failure: Failure::Conflict,
            ..
        })
    ));
    harness
        .executor
        .submit(ledgered(Some(&sink.url), true), Registry::builtin());
    harness
        .server
        .next()
        .await
        .unwrap()
        .refuse(404, "jobs.batch \"done\" not found");
    assert!(feedback(&mut harness).await.is_none());
    assert!(quiet(&mut harness.server).await);
    assert_eq!(sink.received(), []);
}

/// Read for its archive, the Job holds more than the controller decodes of one object (a spec of
/// 24,000 one-entry maps, or nested 300 deep): that is not the version judged, so it is neither
/// archived nor deleted, as a changed object is not, and reading it held nothing past the bound.
#[tokio::test]
async fn an_object_read_past_the_bound_for_its_archive_is_neither_archived_nor_deleted() {
    let sink = Sink::start(&["202 Accepted"]).await;
    let (mut harness, _ledger) = harness(None, 10);
    let dense = json!({"env": vec![json!({"name": "E"}); 24_000]});
    let deep = (0..300).fold(json!(1), |inner, _| json!({"a": inner}));
    for spec in [dense, deep] {
        harness
            .executor
            .submit(ledgered(Some(&sink.url), true), Registry::builtin());
        let get = harness.server.next().await.unwrap();
        assert_eq!(get.line(), format!("GET {JOB}"));
        let mut read = job("1");
        read["spec"] = spec;
        get.reply(200, &read);
        assert!(matches!(
            feedback(&mut harness).await,
            Some(Feedback::DeleteFailed {
                failure: Failure::Conflict,
                ..
            })
        ));
        assert!(quiet(&mut harness.server).await, "no DELETE");
    }
    assert_eq!(sink.received(), []);
}

#[tokio::test]
async fn without_archiving_the_deletion_is_announced_after_it_to_both_sinks() {
    let policy_sink = Sink::start(&["202 Accepted"]).await;
    let cluster_sink = Sink::start(&["202 Accepted"]).await;
    let (mut harness, _ledger) = harness(Some(&cluster_sink.url), 10);
    harness
        .executor
        .submit(ledgered(Some(&policy_sink.url), false), Registry::builtin());
    let delete = harness.server.next().await.unwrap();
    assert_eq!(delete.line(), format!("DELETE {JOB}"));
    delete.reply(200, &job("1"));
    for _ in 0..100 {
        if policy_sink.received().len() + cluster_sink.received().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for sink in [&policy_sink, &cluster_sink] {
        let received = sink.received();
        assert_eq!(received.len(), 1, "{received:?}");
        let entry: Entry = serde_json::from_value(received[0].1.clone()).unwrap();
        assert_eq!((entry.reason.as_str(), entry.object), ("ttl", None));
    }
    let delivered = |sink| {
        harness
            .ledger
            .delivered
            .get_or_create(&SinkLabels { sink })
            .get()
    };
    assert_eq!((delivered("policy"), delivered("cluster")), (1, 1));
}

#[tokio::test]
async fn a_full_queue_drops_and_counts() {
    let sink = Sink::start(&["202 Accepted"]).await;
    let (harness, ledger) = harness(Some(&sink.url), 1);
    let entry: Entry = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "namespace": "team", "name": "done",
        "uid": "uid", "reason": "ttl", "decidedBy": "its own settings",
        "time": "2026-01-01T00:00:00Z"}))
    .unwrap();
    // No await in between: the delivery task takes none off the queue meanwhile.
    for _ in 0..20 {
        ledger.announce(DELETED, &entry, None, false);
    }
    let dropped = harness
        .ledger
        .dropped
        .get_or_create(&SinkLabels { sink: "cluster" })
        .get();
    assert_eq!(dropped, 19, "one fits the queue of one");
}

#[test]
fn the_state_says_who_decided_with_what_and_where_it_goes() {
    use kube_retention_state::PolicyKey;
    use support::{JOB as JOB_KIND, at, kind, leader, loaded_policy, object};
    let mut state = leader();
    let key = PolicyKey {
        namespace: Some("ns".into()),
        name: "jobs".into(),
    };
    state.policy_applied(
        key,
        loaded_policy(json!({
            "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
            "ttlAfterSucceeded": "1h", "sink": "http://archive.example/",
            "archiveBeforeDelete": true})),
    );
    let job = object(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "uid-j", "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"completionTime": "2026-01-01T00:00:00Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }));
    let value = object_value(&state.kinds()[kind(JOB_KIND)].resource, &job).unwrap();
    state.judged(
        kind(JOB_KIND),
        &job,
        &value,
        None,
        at("2026-01-01T00:00:01Z"),
    );
    let actions = state.due(at("2026-01-01T01:00:00Z"));
    let [
        Action::Delete {
            ledger: Some(ledgered),
            ..
        },
    ] = &actions[..]
    else {
        panic!("{actions:?}");
    };
    assert_eq!(
        **ledgered,
        Ledgered {
            decided_by: "RetentionPolicy ns/jobs".into(),
            setting: Some("ttlAfterSucceeded: 1h0m0s".into()),
            deadline: Some(at("2026-01-01T01:00:00Z")),
            sink: Some(Arc::from("http://archive.example/")),
            archive: true,
        }
    );
}
