//! The loop against a mocked API server when the evaluator must let go of work: a namespace
//! whose big Jobs, all judged by a policy with an expression, fill its lane of the evaluator's
//! backlog has the newest shed; each shed Job is fetched again with one GET at its turn, then
//! judged and deleted like the others — nothing is lost to the bound, and nothing is fetched
//! that was not shed. The policy, compiled on the evaluator, lists the Jobs of its own namespace
//! only once it arrives.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher::Event;
use kube_retention_common::api::RetentionPolicy;
use kube_retention_controller::run::Clock;
use kube_retention_evaluator::{Bounds, Evaluator, EvaluatorMetrics, Progress, Work, WorkKey};
use kube_retention_io::watches::WatchEvent;
use kube_retention_runtime::object_memory::{DEFAULT_BYTES, ObjectMemory};
use kube_retention_runtime::time_shares::TimeShares;
use serde_json::{Value, json};

use crate::loop_support;

const JOBS: usize = 4;
/// Each Job's annotation filler: four fit no lane of 300 KB.
const FILLER: usize = 100_000;

fn job(name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
                     "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"retention.dev/managed": "true"},
                     "annotations": {"filler": "x".repeat(FILLER)}},
        "status": {"completionTime": "2026-01-01T00:00:01Z", "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}
    })
}

fn policy() -> RetentionPolicy {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
        "metadata": {"name": "jobs", "namespace": "team-a", "uid": "uid-policy", "generation": 1},
        "spec": {"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
                 "match": "object.metadata.name.startsWith('job-')",
                 "ttlAfterSucceeded": "1s"}
    }))
    .unwrap()
}

/// What the mocked API server saw of a run.
struct Seen {
    deleted: Vec<String>,
    /// The lists by name of shed Jobs, by name.
    fetched: BTreeMap<String, usize>,
    namespace_lists: usize,
    shed: u64,
    /// The most the loop's decoded objects were charged at any request, and at the end.
    most_charged: usize,
    charged_at_end: usize,
}

impl Seen {
    /// The lists by name of shed Jobs, every try counted.
    fn fetches(&self) -> u64 {
        self.fetched.values().map(|&tries| tries as u64).sum()
    }
}

/// The names of the Jobs the policy judges, in order.
fn job_names() -> Vec<String> {
    (0..JOBS).map(|n| format!("job-{n}")).collect()
}

/// Runs the loop over four big Jobs of `team-a` and a policy with an expression over them, the
/// evaluator held so that they queue together past the namespace lane's bound; shed Jobs
/// listed by name are answered by `fetch` (the Job, or a refusal); until `done` says so of
/// what was seen.
async fn shed_run(fetch: fn(&str) -> Result<Value, u16>, done: fn(&Seen) -> bool) -> Seen {
    shed_run_within(ObjectMemory::new(DEFAULT_BYTES), fetch, done).await
}

/// As [`shed_run`], the loop's decoded objects charged to `memory`.
async fn shed_run_within(
    memory: ObjectMemory,
    fetch: fn(&str) -> Result<Value, u16>,
    done: fn(&Seen) -> bool,
) -> Seen {
    let (client, mut api) = kube_retention_apimock::pair();
    let bounds = Bounds {
        namespace_bytes: 300_000,
        ..Bounds::default()
    };
    let metrics = EvaluatorMetrics::default();
    let shares = TimeShares::new(0.5, Duration::ZERO);
    let (evaluator, evaluating) = Evaluator::spawn_with(
        metrics.clone(),
        shares,
        bounds,
        crate::support::evaluator_process(),
    )
    .unwrap();
    // The policy comes through the stream the Jobs' watch starts with, is compiled on the
    // evaluator, and its change then lists the Jobs of its namespace afresh, from the mocked
    // API server. Before that list is answered, a gate holds the evaluator's thread: the four
    // Jobs queue together behind it.
    let gate = Gate::default();
    let running = loop_support::start_within(
        memory,
        kube_retention_state::State::new(kube_retention_common::Registry::builtin().clone()),
        client,
        Clock::System,
        "Job.batch",
        (evaluator.clone(), evaluating),
    );
    running
        .events
        .send(WatchEvent::Policy(Ok(Event::Apply(policy()))))
        .unwrap();
    let names = job_names();
    let mut seen = Seen {
        deleted: Vec::new(),
        fetched: BTreeMap::new(),
        namespace_lists: 0,
        shed: 0,
        most_charged: 0,
        charged_at_end: 0,
    };
    let mut open = Vec::new();
    let mut lines = Vec::new();
    while !done(&seen) {
        let Some(received) = api.next_within(Duration::from_secs(60)).await else {
            panic!("no request for a minute, after {lines:#?}");
        };
        lines.push(received.line());
        seen.most_charged = seen.most_charged.max(running.memory.held());
        let path = received.path.clone();
        if received.query.contains("watch=true") {
            open.push(received.unanswered());
            continue;
        }
        let by_name = received
            .query
            .split('&')
            .find_map(|pair| pair.strip_prefix("fieldSelector=metadata.name%3D"))
            .map(str::to_owned);
        match (received.method.as_str(), by_name) {
            ("GET", _) if path == "/apis/batch/v1/jobs" => {
                panic!("a RetentionPolicy's change listed every namespace's Jobs: {lines:?}")
            }
            ("GET", Some(name)) => {
                assert_eq!(path, "/apis/batch/v1/namespaces/team-a/jobs");
                *seen.fetched.entry(name.clone()).or_default() += 1;
                match fetch(&name) {
                    Ok(job) => received.reply(200, &job_list(vec![job])),
                    Err(code) => received.refuse(code, "not today"),
                }
            }
            ("GET", None) if path == "/apis/batch/v1/namespaces/team-a/jobs" => {
                seen.namespace_lists += 1;
                gate.close(&evaluator);
                received.reply(200, &job_list(names.iter().map(|name| job(name)).collect()));
                gate.open_after(Duration::from_secs(2));
            }
            ("DELETE", _) => {
                let name = path.rsplit('/').next().unwrap().to_owned();
                assert_eq!(
                    received.body["preconditions"],
                    json!({"uid": format!("uid-{name}"), "resourceVersion": "7"})
                );
                seen.deleted.push(name);
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
                received.reply(200, &status);
            }
            _ => received.reply(200, &json!({})),
        }
        seen.shed = metrics.shed.get();
    }
    // What the last answers judged held is given back as the loop goes on from them.
    tokio::time::sleep(Duration::from_millis(100)).await;
    seen.charged_at_end = running.memory.held();
    running.task.abort();
    drop(open);
    seen.deleted.sort();
    seen
}

/// A work that holds the evaluator's thread in its step until opened: what the loop sends
/// meanwhile waits in the thread's channel, and is queued all at once after.
#[derive(Default, Clone)]
struct Gate {
    opened: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Gate {
    /// Sends the gate to the evaluator, and waits until its step holds the thread.
    fn close(&self, evaluator: &Evaluator) {
        let (held, holding) = std::sync::mpsc::channel();
        let work = GateWork {
            gate: self.clone(),
            namespace: Arc::from("gate"),
            held,
        };
        assert!(evaluator.submit(Box::new(work)));
        holding.recv_timeout(Duration::from_secs(30)).unwrap();
    }

    /// Opens the gate `after` from now, from a thread of its own.
    fn open_after(&self, after: Duration) {
        let opened = self.opened.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            *opened.0.lock().unwrap() = true;
            opened.1.notify_all();
        });
    }
}

struct GateWork {
    gate: Gate,
    namespace: Arc<str>,
    held: std::sync::mpsc::Sender<()>,
}

impl Work for GateWork {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(Arc::from("gate"))
    }

    fn step(&mut self, _: &mut kube_retention_evaluator::Sandbox) -> Progress {
        self.held.send(()).ok();
        let (opened, waiting) = &*self.gate.opened;
        let mut open = opened.lock().unwrap();
        while !*open {
            open = waiting.wait(open).unwrap();
        }
        Progress::Done
    }

    fn weight(&self) -> usize {
        0
    }

    fn finish(self: Box<Self>) {}

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        self
    }
}

fn job_list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "10"},
           "items": items})
}

#[tokio::test]
async fn a_job_the_evaluator_shed_is_fetched_again_at_its_turn_and_judged() {
    let seen = shed_run(|name| Ok(job(name)), |seen| seen.deleted.len() == JOBS).await;
    assert_eq!(
        seen.deleted,
        job_names(),
        "every Job judged and deleted, shed or not"
    );
    assert_eq!(
        seen.namespace_lists, 1,
        "the policy's change listed its namespace's Jobs once"
    );
    assert_eq!(
        seen.shed, 2,
        "four Jobs of a little over 100 KB queued: the two newest do not fit a 300 KB lane"
    );
    assert_eq!(
        seen.fetches(),
        seen.shed,
        "one list by name for each Job shed, and none for the others: {:?}",
        seen.fetched
    );
    assert!(
        seen.most_charged >= 2 * FILLER,
        "the Jobs queued were charged as they were decoded: at most {} bytes",
        seen.most_charged
    );
    assert_eq!(
        seen.charged_at_end, 0,
        "every Job's charge given back, through the backlog, shedding, fetching again and judging"
    );
}

#[tokio::test]
async fn a_shed_job_that_cannot_be_fetched_is_given_up_after_three_tries_and_the_rest_go() {
    // The two Jobs not shed are deleted; the two shed cannot be fetched (403), each tried three
    // times, five seconds apart, then left for their next change: their places among the works
    // coming back are free again.
    let seen = shed_run(
        |_| Err(403),
        |seen| {
            seen.deleted.len() == 2
                && seen.fetched.values().all(|tries| *tries == 3)
                && seen.fetched.len() == 2
        },
    )
    .await;
    assert_eq!(seen.deleted, ["job-0", "job-1"]);
    assert_eq!(seen.shed, 2);
    assert_eq!(
        seen.charged_at_end, 0,
        "nothing charged for the Jobs given up"
    );
    assert_eq!(
        seen.fetched,
        BTreeMap::from([("job-2".to_owned(), 3), ("job-3".to_owned(), 3)])
    );
}

/// A budget of decoded objects with room for one Job and the model's JSON of it, not two: the
/// Jobs listed together are charged as they are read, and each sent to the evaluator only with
/// room for its JSON, else shed at once (though its lane has room) and fetched again at its turn
/// with room for both taken as it is read. Every Job is judged and deleted, and every charge
/// given back.
#[tokio::test]
async fn a_job_with_no_room_for_its_json_is_shed_at_once_and_fetched_again_with_it() {
    let object = kube_retention_runtime::held::object_held_bytes(
        &serde_json::from_value(job("job-0")).unwrap(),
    );
    let room = object + kube_retention_evaluator::value_bytes(object) + object / 2;
    let seen = shed_run_within(
        ObjectMemory::new(room),
        |name| Ok(job(name)),
        |seen| seen.deleted.len() == JOBS,
    )
    .await;
    assert_eq!(seen.deleted, job_names(), "every Job judged and deleted");
    // The Jobs cannot queue together here, so the lane's bound sheds none of them: each shed
    // is a Job read while others held the room, with none for its JSON.
    assert!(seen.shed >= 1, "none shed for want of room");
    assert_eq!(seen.fetches(), seen.shed, "{:?}", seen.fetched);
    assert!(seen.most_charged <= room);
    assert_eq!(seen.charged_at_end, 0);
}
