//! The controller loop: one paged LIST and then a watch per kind, feeding [`State`] — plus, for
//! kinds watched through the managed label, a metadata-only watch of the unlabelled, which finds
//! objects the webhook never labelled; a timer on the earliest deadline; leadership changes;
//! and the executor's feedback. Actions go to the [`Executor`].

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube_retention_common::kinds::KindId;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::discovery::Scan;
use crate::executor::{Executor, Feedback};
use crate::metrics::{ErrorLabels, KindLabels, Metrics};
use kube_retention_io::watches::{WatchEvent, Watches};
use kube_retention_state::{Action, State};

pub struct Loop {
    pub state: State,
    /// The configured kinds the cluster serves (the others are skipped).
    pub served: Vec<KindId>,
    pub watches: Watches,
    /// Periodic scans for annotated kinds beyond the configured ones.
    pub scans: mpsc::Receiver<Scan>,
    pub executor: Executor,
    pub feedback: mpsc::UnboundedReceiver<Feedback>,
    pub leadership: watch::Receiver<bool>,
    pub metrics: Metrics,
    /// Set once every served kind has been listed: /readyz answers 200 from then on.
    pub ready: Arc<AtomicBool>,
    /// Kinds found by scans, retention policies and what was last written to their status.
    pub extra: Extra,
    /// Policies' expressions, evaluated off the loop.
    pub evaluations: Evaluations,
    /// The time the state is judged at.
    pub clock: Clock,
}

/// Kinds watched because a scan found them, and kinds reported for lacking permissions.
#[derive(Default)]
pub struct Discovered {
    pub(crate) watching: HashSet<KindId>,
    /// Kind → the verbs missing, comma-separated.
    pub(crate) unpermitted: HashMap<String, String>,
}

mod compiles;
mod evaluations;
mod governed;
mod policies;
mod readiness;
mod refetch;
mod scan;

pub use compiles::Compiles;
pub use evaluations::Evaluations;
pub use kube_retention_io::clock::Clock;
pub use policies::Extra;

impl Loop {
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        for &kind in &self.served {
            self.watches.start(kind, &self.state.kinds()[kind]);
        }
        tokio::pin!(shutdown);
        let mut gauges = tokio::time::interval(Duration::from_secs(5));
        let mut label_retries = tokio::time::interval(Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(3600 * 24 * 365);
        let mut unlisted = readiness::Unlisted::new(&self.served);
        if unlisted.ready() {
            self.ready.store(true, Ordering::Relaxed);
        }
        let initial = *self.leadership.borrow_and_update();
        self.metrics.leader.set(i64::from(initial));
        let actions = self.state.set_leader(initial, self.clock.now());
        self.submit(actions);
        loop {
            let deadline = self
                .state
                .next_deadline()
                .map_or(far, |at| self.clock.instant_at(at));
            let relist = self.extra.relists.next().unwrap_or(far);
            let actions = tokio::select! {
                observed = self.watches.next() => match observed {
                    WatchEvent::Object(kind, event) => {
                        if matches!(event, Ok(Event::InitDone)) && unlisted.listed(kind) {
                            self.ready.store(true, Ordering::Relaxed);
                        }
                        self.on_event(kind, event)
                    }
                    WatchEvent::Metadata(kind, event) => self.on_metadata(kind, event),
                    WatchEvent::Relisted(kind, namespace, event) => self.on_relisted(kind, namespace, event),
                    WatchEvent::Policy(event) => self.on_policy(event),
                    WatchEvent::ClusterPolicy(event) => self.on_policy(event),
                    WatchEvent::Namespace(event) => self.on_namespace(event),
                },
                Some(outcome) = self.evaluations.results.recv() => self.on_outcome(outcome),
                Some(fetched) = self.evaluations.fetched.recv() => self.on_fetched(fetched),
                Some(compiled) = self.evaluations.compiles.recv() => self.on_compiled(compiled),
                Some(scan) = self.scans.recv() => {
                    self.on_scan(scan);
                    Vec::new()
                }
                Some(feedback) = self.feedback.recv() => {
                    let now = self.clock.now();
                    match feedback {
                        Feedback::DeleteFailed { key, failure } => self.state.delete_failed(&key, failure, now),
                        Feedback::StampFailed { key, failure } => self.state.stamp_failed(&key, failure, now),
                        Feedback::LabelFailed { key, failure } => self.state.labelling().failed(&key, failure, now),
                        Feedback::Deleted { policy } => {
                            self.state.policy_deleted(&policy);
                            Vec::new()
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => self.state.due(self.clock.now()),
                () = tokio::time::sleep_until(relist) => {
                    self.relist_due();
                    Vec::new()
                }
                Ok(()) = self.leadership.changed() => {
                    let leader = *self.leadership.borrow_and_update();
                    tracing::info!(leader, "leadership changed");
                    if !leader {
                        // The new leader writes statuses; retries of ours could land after its.
                        self.extra.statuses.forget_all();
                    }
                    self.metrics.leader.set(i64::from(leader));
                    self.state.set_leader(leader, self.clock.now())
                }
                _ = gauges.tick() => {
                    self.update_gauges();
                    self.write_policy_statuses();
                    Vec::new()
                }
                // Labels whose backoff ended.
                _ = label_retries.tick() => { let now = self.clock.now(); self.state.labelling().retry(now) },
                () = &mut shutdown => return,
            };
            self.submit(actions);
        }
    }

    fn update_gauges(&self) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let gauges = self.state.gauges(self.clock.now());
        for (kind, tracked) in gauges.tracked {
            let label = KindLabels {
                kind: self.state.kinds()[kind].resource.to_string(),
            };
            self.metrics
                .tracked
                .get_or_create(&label)
                .set(count(tracked));
        }
        self.metrics.in_backoff.set(count(gauges.in_backoff));
        self.metrics.overdue.set(count(gauges.overdue));
        self.metrics.held.set(count(gauges.held));
        let awaiting = count(gauges.awaiting_approval);
        self.metrics.awaiting_approval.set(awaiting);
        self.metrics.stragglers.set(count(gauges.stragglers));
    }

    fn submit(&self, actions: Vec<Action>) {
        for action in actions {
            self.executor.submit(action, self.state.kinds());
        }
    }

    fn watch_failed(&self, kind: KindId, error: &watcher::Error) {
        let resource = &self.state.kinds()[kind].resource;
        tracing::warn!(kind = %resource.kind, %error, "watch failed; retrying with backoff");
        self.metrics
            .errors
            .get_or_create(&ErrorLabels {
                kind: resource.to_string(),
                operation: "watch",
            })
            .inc();
    }

    fn on_event(
        &mut self,
        kind: KindId,
        event: Result<Event<DynamicObject>, watcher::Error>,
    ) -> Vec<Action> {
        let now = self.clock.now();
        match event {
            Ok(Event::Init) => {
                self.state.relist_started(kind);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                self.on_applied(kind, object, now)
            }
            Ok(Event::InitDone) => {
                let resource = &self.state.kinds()[kind].resource;
                let tracked = self.state.gauges(now).tracked.get(&kind).copied();
                tracing::info!(kind = %resource.kind, tracked, "listed");
                let label = KindLabels {
                    kind: resource.to_string(),
                };
                self.metrics.lists.get_or_create(&label).inc();
                let mut actions = self.state.relist_done(kind, now);
                self.evaluations.list_done(kind);
                actions.extend(self.settle(kind));
                actions.extend(self.state.due(now));
                actions
            }
            Ok(Event::Delete(object)) => {
                let awaited = evaluations::key_of(kind, &object)
                    .is_some_and(|key| self.evaluations.forget(&key));
                if let Some((namespace, name)) = namespaced_name(&object.metadata) {
                    self.state.removed(kind, namespace, name);
                }
                match awaited {
                    true => self.settle(kind),
                    false => Vec::new(),
                }
            }
            Err(error) => {
                self.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }

    fn on_metadata(
        &mut self,
        kind: KindId,
        event: Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ) -> Vec<Action> {
        match event {
            Ok(Event::Init) => {
                self.state.labelling().relisted(kind);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                let now = self.clock.now();
                self.state.labelling().seen(kind, &object.metadata, now)
            }
            Ok(Event::InitDone) => Vec::new(),
            Ok(Event::Delete(object)) => {
                if let Some((namespace, name)) = namespaced_name(&object.metadata) {
                    self.state.labelling().gone(kind, namespace, name);
                }
                Vec::new()
            }
            Err(error) => {
                self.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }
}

/// An object's namespace and name, where it has both.
fn namespaced_name(metadata: &ObjectMeta) -> Option<(&str, &str)> {
    Some((metadata.namespace.as_deref()?, metadata.name.as_deref()?))
}
