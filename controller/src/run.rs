//! The controller loop: one paged LIST and then a watch per kind, feeding [`State`]; a timer on
//! the earliest deadline; leadership changes; and the executor's feedback. Actions go to the
//! [`Executor`].

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, stream};
use jiff::Timestamp;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::executor::{Executor, Feedback};
use crate::metrics::{ErrorLabels, KindLabels, Metrics};
use crate::state::State;

/// How long after a failed DELETE (other than a conflict) it is tried again.
const RETRY_AFTER: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

pub struct Loop {
    pub client: Client,
    pub state: State,
    /// Indexes of the kinds the cluster serves (the others are skipped).
    pub served: Vec<usize>,
    pub executor: Executor,
    pub feedback: mpsc::UnboundedReceiver<Feedback>,
    pub leadership: watch::Receiver<bool>,
    pub metrics: Metrics,
    pub page_size: u32,
    /// Set once every served kind has been listed: /readyz answers 200 from then on.
    pub ready: Arc<AtomicBool>,
}

fn instant_at(at: Timestamp) -> Instant {
    let wait = at.duration_since(Timestamp::now());
    Instant::now() + Duration::try_from(wait).unwrap_or(Duration::ZERO)
}

impl Loop {
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let streams = self.served.iter().map(|&kind| {
            let watched = &self.state.kinds()[kind];
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &watched.resource);
            let mut config = watcher::Config::default().page_size(self.page_size);
            if let Some(selector) = &watched.selector {
                config = config.labels(selector);
            }
            watcher::watcher(api, config)
                .default_backoff()
                .map(move |event| (kind, event))
                .boxed()
        });
        let mut events = stream::select_all(streams);
        tokio::pin!(shutdown);
        let mut gauges = tokio::time::interval(Duration::from_secs(5));
        let far = Instant::now() + Duration::from_secs(3600 * 24 * 365);
        let mut listed = HashSet::new();
        let initial = *self.leadership.borrow_and_update();
        self.metrics.leader.set(i64::from(initial));
        let actions = self.state.set_leader(initial, Timestamp::now());
        self.submit(actions);
        loop {
            let deadline = self.state.next_deadline().map_or(far, instant_at);
            let actions = tokio::select! {
                Some((kind, event)) = events.next() => {
                    if matches!(event, Ok(Event::InitDone)) && listed.insert(kind) && listed.len() == self.served.len() {
                        self.ready.store(true, Ordering::Relaxed);
                    }
                    self.on_event(kind, event)
                }
                Some(feedback) = self.feedback.recv() => {
                    match feedback {
                        Feedback::DeleteFailed { key, conflict } => {
                            self.state.delete_failed(&key, conflict, Timestamp::now() + RETRY_AFTER)
                        }
                        Feedback::StampFailed { key } => self.state.stamp_failed(&key),
                    }
                    Vec::new()
                }
                () = tokio::time::sleep_until(deadline) => self.state.due(Timestamp::now()),
                Ok(()) = self.leadership.changed() => {
                    let leader = *self.leadership.borrow_and_update();
                    tracing::info!(leader, "leadership changed");
                    self.metrics.leader.set(i64::from(leader));
                    self.state.set_leader(leader, Timestamp::now())
                }
                _ = gauges.tick() => {
                    for &kind in &self.served {
                        let label = KindLabels { kind: self.state.kinds()[kind].resource.kind.clone() };
                        let tracked = i64::try_from(self.state.tracked(kind)).unwrap_or(i64::MAX);
                        self.metrics.tracked.get_or_create(&label).set(tracked);
                    }
                    Vec::new()
                }
                () = &mut shutdown => return,
            };
            self.submit(actions);
        }
    }

    fn submit(&self, actions: Vec<crate::state::Action>) {
        for action in actions {
            self.executor.submit(action);
        }
    }

    fn on_event(
        &mut self,
        kind: usize,
        event: Result<Event<DynamicObject>, watcher::Error>,
    ) -> Vec<crate::state::Action> {
        let now = Timestamp::now();
        match event {
            Ok(Event::Init) => {
                self.state.relist_started(kind);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                self.state.applied(kind, &object, now)
            }
            Ok(Event::InitDone) => {
                tracing::info!(kind = %self.state.kinds()[kind].resource.kind, tracked = self.state.tracked(kind), "listed");
                self.state.relist_done(kind);
                self.state.due(now)
            }
            Ok(Event::Delete(object)) => {
                let (Some(namespace), Some(name)) = (
                    object.metadata.namespace.as_deref(),
                    object.metadata.name.as_deref(),
                ) else {
                    return Vec::new();
                };
                self.state.removed(kind, namespace, name);
                Vec::new()
            }
            Err(error) => {
                let resource = &self.state.kinds()[kind].resource;
                tracing::warn!(kind = %resource.kind, %error, "watch failed; retrying with backoff");
                self.metrics
                    .errors
                    .get_or_create(&ErrorLabels {
                        kind: resource.kind.clone(),
                        operation: "watch",
                    })
                    .inc();
                Vec::new()
            }
        }
    }
}
