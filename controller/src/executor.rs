//! Carries out the state's decisions against the API server within a client-side request budget.
//!
//! Deletions come first, then `expires-at` stamps, then Events: under a backlog every request of
//! the budget goes to deleting, and the informational writes catch up afterwards. Each DELETE is a
//! single request carrying uid and resourceVersion preconditions; a refused precondition means the
//! object changed, and the watch brings the version to judge instead.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{
    DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};

use crate::kinds::WatchedKind;
use crate::metrics::{DeletionLabels, ErrorLabels, KindLabels, Metrics};
use crate::state::{Action, EventTarget, Key, Reason};

/// What the state must hear back about.
#[derive(Debug)]
pub enum Feedback {
    DeleteFailed { key: Key, conflict: bool },
    StampFailed { key: Key },
}

enum Work {
    Action(Action),
    Event {
        target: EventTarget,
        namespace: String,
        note: String,
        reason: Reason,
    },
}

impl Work {
    fn priority(&self) -> usize {
        match self {
            Work::Action(Action::Delete { .. }) => 0,
            Work::Action(Action::Stamp { .. }) => 1,
            Work::Event { .. } => 2,
        }
    }
}

pub struct Settings {
    /// Requests per second; `None` is unlimited.
    pub budget: Option<NonZeroU32>,
    pub propagation: PropagationPolicy,
    pub concurrency: usize,
    pub events: bool,
}

#[derive(Clone)]
pub struct Executor {
    tx: mpsc::UnboundedSender<Work>,
}

struct Shared {
    client: Client,
    kinds: Vec<WatchedKind>,
    settings: Settings,
    metrics: Metrics,
    recorder: Recorder,
    feedback: mpsc::UnboundedSender<Feedback>,
    tx: mpsc::UnboundedSender<Work>,
}

impl Executor {
    pub fn spawn(
        client: Client,
        kinds: Vec<WatchedKind>,
        settings: Settings,
        metrics: Metrics,
        recorder: Recorder,
        feedback: mpsc::UnboundedSender<Feedback>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let limiter = settings
            .budget
            .map(|budget| Arc::new(RateLimiter::direct(Quota::per_second(budget))));
        let shared = Arc::new(Shared {
            client,
            kinds,
            settings,
            metrics,
            recorder,
            feedback,
            tx: tx.clone(),
        });
        tokio::spawn(dispatch(shared, rx, limiter));
        Self { tx }
    }

    pub fn submit(&self, action: Action) {
        self.tx.send(Work::Action(action)).ok();
    }
}

/// Events waiting for spare budget beyond this are dropped, oldest first (and counted), so a
/// long backlog cannot grow the controller's memory without bound.
const MAX_QUEUED_EVENTS: usize = 10_000;

fn enqueue(queues: &mut [VecDeque<Work>; 3], work: Work, metrics: &Metrics) {
    let queue = &mut queues[work.priority()];
    queue.push_back(work);
    if queue.len() > MAX_QUEUED_EVENTS
        && let Some(Work::Event { .. }) = queue.front()
    {
        queue.pop_front();
        metrics.events_dropped.inc();
    }
}

async fn dispatch(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Work>,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
) {
    let mut queues: [VecDeque<Work>; 3] = Default::default();
    let permits = Arc::new(Semaphore::new(shared.settings.concurrency.max(1)));
    loop {
        if queues.iter().all(VecDeque::is_empty) {
            match rx.recv().await {
                Some(work) => enqueue(&mut queues, work, &shared.metrics),
                None => return,
            }
        }
        while let Ok(work) = rx.try_recv() {
            enqueue(&mut queues, work, &shared.metrics);
        }
        if let Some(limiter) = &limiter {
            limiter.until_ready().await;
            // Work that arrived while waiting may outrank what was queued.
            while let Ok(work) = rx.try_recv() {
                enqueue(&mut queues, work, &shared.metrics);
            }
        }
        let Some(work) = next(&mut queues) else {
            continue;
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            perform(&shared, work).await;
            drop(permit);
        });
    }
}

/// The most urgent work, passing over stamps that waited past their own expiry: they would
/// announce what has already happened, and spend budget the deletions need.
fn next(queues: &mut [VecDeque<Work>; 3]) -> Option<Work> {
    let now = Timestamp::now();
    while let Some(work) = queues.iter_mut().find_map(VecDeque::pop_front) {
        if let Work::Action(Action::Stamp { expires_at, .. }) = &work
            && expires_at.parse::<Timestamp>().is_ok_and(|at| at <= now)
        {
            continue;
        }
        return Some(work);
    }
    None
}

async fn perform(shared: &Shared, work: Work) {
    match work {
        Work::Action(Action::Delete {
            key,
            uid,
            resource_version,
            reason,
            eligible_at,
            event_target,
        }) => {
            delete(
                shared,
                key,
                &uid,
                &resource_version,
                reason,
                eligible_at,
                event_target,
            )
            .await;
        }
        Work::Action(Action::Stamp { key, expires_at }) => stamp(shared, key, &expires_at).await,
        Work::Event {
            target,
            namespace,
            note,
            reason,
        } => {
            let reference = ObjectReference {
                api_version: Some(target.api_version),
                kind: Some(target.kind),
                name: Some(target.name),
                namespace: Some(namespace),
                uid: target.uid,
                ..ObjectReference::default()
            };
            let event = Event {
                type_: EventType::Normal,
                reason: match reason {
                    Reason::Ttl => "RetentionExpired".into(),
                    Reason::Limit => "RetentionLimit".into(),
                },
                note: Some(note),
                action: "Delete".into(),
                secondary: None,
            };
            if let Err(error) = shared.recorder.publish(&event, &reference).await {
                tracing::warn!(%error, "could not record an Event");
                shared
                    .metrics
                    .errors
                    .get_or_create(&ErrorLabels {
                        kind: "Event".into(),
                        operation: "create",
                    })
                    .inc();
            }
        }
    }
}

fn api(shared: &Shared, key: &Key) -> Api<DynamicObject> {
    Api::namespaced_with(
        shared.client.clone(),
        &key.namespace,
        &shared.kinds[key.kind].resource,
    )
}

async fn delete(
    shared: &Shared,
    key: Key,
    uid: &str,
    resource_version: &str,
    reason: Reason,
    eligible_at: Timestamp,
    event_target: EventTarget,
) {
    let kind = shared.kinds[key.kind].resource.kind.clone();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: Some(resource_version.to_owned()),
        }),
        propagation_policy: Some(shared.settings.propagation.clone()),
        ..DeleteParams::default()
    };
    match api(shared, &key).delete(&key.name, &params).await {
        Ok(_) => {
            let delay = Timestamp::now()
                .duration_since(eligible_at)
                .as_secs_f64()
                .max(0.0);
            let reason_label = match reason {
                Reason::Ttl => "ttl",
                Reason::Limit => "limit",
            };
            shared
                .metrics
                .deletions
                .get_or_create(&DeletionLabels {
                    kind: kind.clone(),
                    reason: reason_label,
                })
                .inc();
            shared.metrics.deletion_delay.observe(delay);
            tracing::info!(kind = %kind, namespace = %key.namespace, name = %key.name, reason = reason_label, delay_seconds = delay, "deleted");
            if shared.settings.events {
                let why = match reason {
                    Reason::Ttl => "its retention time passed".to_owned(),
                    Reason::Limit => "it exceeded its parent's history limit".to_owned(),
                };
                let note = format!("Deleted {kind} {}: {why}", key.name);
                shared
                    .tx
                    .send(Work::Event {
                        target: event_target,
                        namespace: key.namespace.to_string(),
                        note,
                        reason,
                    })
                    .ok();
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            shared
                .metrics
                .conflicts
                .get_or_create(&KindLabels { kind })
                .inc();
            shared
                .feedback
                .send(Feedback::DeleteFailed {
                    key,
                    conflict: true,
                })
                .ok();
        }
        Err(error) => {
            tracing::warn!(kind = %kind, namespace = %key.namespace, name = %key.name, %error, "delete failed; will retry");
            shared
                .metrics
                .errors
                .get_or_create(&ErrorLabels {
                    kind,
                    operation: "delete",
                })
                .inc();
            shared
                .feedback
                .send(Feedback::DeleteFailed {
                    key,
                    conflict: false,
                })
                .ok();
        }
    }
}

async fn stamp(shared: &Shared, key: Key, expires_at: &str) {
    let kind = shared.kinds[key.kind].resource.kind.clone();
    let patch = json!({"metadata": {"annotations": {kube_retention_common::annotations::EXPIRES_AT: expires_at}}});
    match api(shared, &key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            shared
                .metrics
                .stamps
                .get_or_create(&KindLabels { kind })
                .inc();
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => {
            tracing::warn!(kind = %kind, namespace = %key.namespace, name = %key.name, %error, "stamping expires-at failed");
            shared
                .metrics
                .errors
                .get_or_create(&ErrorLabels {
                    kind,
                    operation: "patch",
                })
                .inc();
            shared.feedback.send(Feedback::StampFailed { key }).ok();
        }
    }
}
