//! Retention policies' CEL (`match`, `finished`), evaluated on a thread of its own, never on
//! the loop that schedules deletions. An expression may take up to its cost limit (tens of
//! milliseconds) on every object of a namespace; on the loop, one tenant's policy would hold
//! up every other tenant's deadlines. Here it holds up at most its own namespace's
//! evaluations: objects wait in one queue per namespace, served round robin, as API Priority
//! and Fairness serves the API server's flows; and an object changed again before its turn is
//! evaluated once, in its latest version. The loop judges an object when its answers come
//! back ([`crate::run`]), and those answers are dropped if a newer version arrived meanwhile.
//!
//! A thread rather than tokio's blocking pool: evaluation is CPU work that never awaits. The
//! thread takes at most [`CPU_SHARE`] of one core, whatever policies ask: after each evaluation
//! it rests in proportion to the time it took (rests shorter than [`MIN_REST`] are added up
//! first), so everyday expressions, which take microseconds, never wait, and expressions stopped
//! at their limit cannot keep a core busy. Within that, each namespace takes at most its own
//! share of a core ([`crate::time_shares`]): one tenant's costly expressions wait for their
//! namespace's time while the others' turns go on, so a tenant gets no more of the machine by
//! writing expressions that run to their limit. The thread also runs at the lowest priority
//! (nice 19), so that where cores are contended the loop, the executor and the API server come
//! first.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc as channel;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube_retention_common::cel::Converted;
use kube_retention_common::governing::Answers;
use kube_retention_common::kinds::Resource;
use kube_retention_runtime::supervise::{self, Supervised};
use serde_json::Value;
use thread_priority::{ThreadPriority, set_current_thread_priority};
use tokio::sync::mpsc;

use crate::fair::FairQueue;
use crate::state::{ObjectKey, PolicyAnswers, Unevaluated};
use crate::time_shares::TimeShares;
use kube_retention_common::model::object_value;

/// An object whose policies' expressions are to be evaluated.
pub struct Job {
    /// Orders the versions of one object: only the latest is evaluated and applied.
    pub seq: u64,
    /// The object's kind, namespace and name.
    pub key: ObjectKey,
    /// Its kind's resource, for the apiVersion and kind the model reads.
    pub resource: Resource,
    pub object: DynamicObject,
    pub policies: Unevaluated,
}

/// A job done: the object as the model reads it (made here, off the loop), what each policy's
/// expressions said, and how long they took.
pub struct Evaluated {
    pub job: Job,
    pub value: Option<Value>,
    pub answers: PolicyAnswers,
    pub took: Duration,
}

/// The most of one core evaluations take.
pub const CPU_SHARE: f64 = 0.25;

/// Rest owed is taken once it reaches this (sleeping for less costs more than it rests).
pub const MIN_REST: Duration = Duration::from_millis(5);

pub struct Evaluator {
    jobs: channel::Sender<Job>,
}

impl Evaluator {
    /// Starts the thread, `cel-evaluator`, and answers it for a supervisor: it ends when the
    /// evaluator is dropped (or `results` closes). Answers come back on `results`.
    pub fn spawn(results: mpsc::UnboundedSender<Evaluated>) -> std::io::Result<(Self, Supervised)> {
        let (jobs, queued) = channel::channel();
        let thread = supervise::thread("cel-evaluator", move || {
            if let Err(error) = set_current_thread_priority(ThreadPriority::Min) {
                tracing::warn!(%error, "could not lower the CEL evaluator's priority");
            }
            serve(&queued, &results, TimeShares::default());
        })?;
        Ok((Self { jobs }, thread))
    }

    /// Queues `job`; false once the thread has ended.
    pub fn submit(&self, job: Job) -> bool {
        self.jobs.send(job).is_ok()
    }
}

/// The thread's body: serves `queued` until it closes, with each namespace's time shared by
/// `shares`; public so that tests can drive it.
pub fn serve(
    queued: &channel::Receiver<Job>,
    results: &mpsc::UnboundedSender<Evaluated>,
    mut shares: TimeShares<Arc<str>>,
) {
    let mut queue: FairQueue<Arc<str>, Job> = FairQueue::default();
    let mut latest: HashMap<ObjectKey, u64> = HashMap::new();
    let mut owed = Duration::ZERO;
    let enqueue =
        |queue: &mut FairQueue<Arc<str>, Job>, latest: &mut HashMap<ObjectKey, u64>, job: Job| {
            latest.insert(job.key.clone(), job.seq);
            queue.push(job.key.namespace.clone(), job);
        };
    loop {
        if queue.is_empty() {
            match queued.recv() {
                Ok(job) => enqueue(&mut queue, &mut latest, job),
                Err(_) => return,
            }
        }
        while let Ok(job) = queued.try_recv() {
            enqueue(&mut queue, &mut latest, job);
        }
        let now = Instant::now();
        let ready = |namespace: &Arc<str>| shares.ready_at(namespace, now).is_none();
        let Some(job) = queue.pop_ready(ready, |job| latest.get(&job.key) == Some(&job.seq)) else {
            // Every namespace with work is in debt: wait for the first to pay it off, or for
            // new work (perhaps a namespace's that is not).
            let next = queue.waiting_keys();
            let Some(until) = next.filter_map(|key| shares.ready_at(key, now)).min() else {
                continue;
            };
            let wait = until.saturating_duration_since(now);
            match queued.recv_timeout(wait) {
                Ok(job) => enqueue(&mut queue, &mut latest, job),
                Err(channel::RecvTimeoutError::Timeout) => {}
                // No more work will come; what is queued is still served.
                Err(channel::RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
            }
            continue;
        };
        latest.remove(&job.key);
        let started = Instant::now();
        let value = object_value(&job.resource, &job.object);
        let answers = value
            .as_ref()
            .map(|value| evaluate(value, &job.policies))
            .unwrap_or_default();
        let took = started.elapsed();
        shares.charge(&job.key.namespace, took, started + took);
        let evaluated = Evaluated {
            job,
            value,
            answers,
            took,
        };
        if results.send(evaluated).is_err() {
            return;
        }
        owed += took.mul_f64((1.0 - CPU_SHARE) / CPU_SHARE);
        if owed >= MIN_REST {
            std::thread::sleep(owed);
            owed = Duration::ZERO;
        }
    }
}

/// Each policy's answers for `value`, converted to CEL once for all of them.
pub fn evaluate(value: &Value, policies: &Unevaluated) -> PolicyAnswers {
    let converted = Converted::new(value);
    policies
        .iter()
        .map(|(key, rules)| {
            let answers = match &converted {
                Ok(converted) => Answers::compute_converted(rules, converted),
                Err(_) => Answers::compute(rules, value),
            };
            (key.clone(), answers)
        })
        .collect()
}
