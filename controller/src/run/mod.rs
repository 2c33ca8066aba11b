//! The controller loop: it owns [`Core`] — the [`State`](kube_retention_state::State), the
//! watches (a list and then a watch per kind, plus, for kinds watched through the managed label,
//! a metadata-only watch of the unlabelled, which finds objects the webhook never labelled),
//! metrics and the clock — and hands it to the concern each event is for: [`Policies`],
//! [`Governed`] kinds, [`Discovered`] kinds, objects and their [`Evaluations`]. Besides: a timer
//! on the earliest deadline, leadership changes, and the executor's feedback. Actions go to the
//! [`Executor`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::runtime::watcher::Event;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::discovery::Scan;
use crate::executor::{Executor, Feedback};
use kube_retention_io::watches::WatchEvent;
use kube_retention_state::Action;

pub struct Loop {
    /// What every concern reads and drives: the state, the watches, metrics and the clock.
    pub core: Core,
    /// Periodic scans for annotated kinds beyond the configured ones.
    pub scans: mpsc::Receiver<Scan>,
    pub executor: Executor,
    pub feedback: mpsc::UnboundedReceiver<Feedback>,
    pub leadership: watch::Receiver<bool>,
    /// Set once every served kind has been listed: /readyz answers 200 from then on.
    pub ready: Arc<AtomicBool>,
    /// Retention policies, loaded and their statuses written.
    pub policies: Policies,
    /// Policies' expressions, evaluated off the loop.
    pub evaluations: Evaluations,
    /// Kinds watched in full because a policy governs them, and their relists.
    pub governed: Governed,
    /// Kinds found by scans.
    pub discovered: Discovered,
}

mod compiles;
mod core;
mod evaluations;
mod governed;
mod objects;
mod policies;
mod readiness;
mod refetch;
mod scan;

pub use self::core::Core;
pub use compiles::Compiles;
pub use evaluations::Evaluations;
pub use governed::Governed;
pub use kube_retention_io::clock::Clock;
pub use policies::Policies;
pub use scan::Discovered;

impl Loop {
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        for &kind in &self.core.served {
            self.core
                .watches
                .start(kind, &self.core.state.kinds()[kind]);
        }
        tokio::pin!(shutdown);
        let mut gauges = tokio::time::interval(Duration::from_secs(5));
        let mut label_retries = tokio::time::interval(Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(3600 * 24 * 365);
        let mut unlisted = readiness::Unlisted::new(&self.core.served);
        if unlisted.ready() {
            self.ready.store(true, Ordering::Relaxed);
        }
        let initial = *self.leadership.borrow_and_update();
        self.core.metrics.leader.set(i64::from(initial));
        let actions = self.core.state.set_leader(initial, self.core.clock.now());
        self.submit(actions);
        loop {
            let core = &mut self.core;
            let deadline = core
                .state
                .next_deadline()
                .map_or(far, |at| core.clock.instant_at(at));
            let relist = self.governed.next_relist().unwrap_or(far);
            let mut refresh = Vec::new();
            let actions = tokio::select! {
                (observed, charge) = core.watches.next() => match observed {
                    WatchEvent::Object(kind, event) => {
                        if matches!(event, Ok(Event::InitDone)) && unlisted.listed(kind) {
                            self.ready.store(true, Ordering::Relaxed);
                        }
                        self.evaluations.on_event(core, kind, event, charge)
                    }
                    WatchEvent::Metadata(kind, event) => core.on_unlabelled(kind, event),
                    WatchEvent::Relisted(kind, namespace, event) => {
                        self.evaluations.on_relisted(core, kind, namespace, event, charge)
                    }
                    WatchEvent::Policy(event) => {
                        refresh = self.policies.on_event(event, core, &mut self.evaluations.compiles);
                        Vec::new()
                    }
                    WatchEvent::ClusterPolicy(event) => {
                        refresh = self.policies.on_event(event, core, &mut self.evaluations.compiles);
                        Vec::new()
                    }
                    WatchEvent::Namespace(event) => {
                        self.governed.on_namespace(event, core, &self.discovered);
                        Vec::new()
                    }
                },
                Some(outcome) = self.evaluations.results.recv() => self.evaluations.on_outcome(core, outcome),
                Some(fetched) = self.evaluations.refetch.fetched.recv() => self.evaluations.on_fetched(core, fetched),
                Some(compiled) = self.evaluations.compiles.recv() => {
                    refresh.extend(Policies::on_compiled(compiled, core, &mut self.evaluations.compiles));
                    Vec::new()
                }
                Some(scan) = self.scans.recv() => {
                    self.discovered.scanned(scan, core);
                    self.governed.follow_policies(core, &self.discovered);
                    Vec::new()
                }
                Some(feedback) = self.feedback.recv() => {
                    let now = core.clock.now();
                    match feedback {
                        Feedback::DeleteFailed { key, failure } => core.state.delete_failed(&key, failure, now),
                        Feedback::StampFailed { key, failure } => core.state.stamp_failed(&key, failure, now),
                        Feedback::LabelFailed { key, failure } => core.state.labelling().failed(&key, failure, now),
                        Feedback::Deleted { policy } => {
                            core.state.policy_deleted(&policy);
                            Vec::new()
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => core.state.due(core.clock.now()),
                () = tokio::time::sleep_until(relist) => {
                    self.governed.relist_due(core);
                    Vec::new()
                }
                Ok(()) = self.leadership.changed() => {
                    let leader = *self.leadership.borrow_and_update();
                    tracing::info!(leader, "leadership changed");
                    core.metrics.leader.set(i64::from(leader));
                    core.state.set_leader(leader, core.clock.now())
                }
                _ = gauges.tick() => {
                    core.update_gauges();
                    if *self.leadership.borrow() {
                        self.policies.write_statuses(core, self.discovered.scan());
                    }
                    Vec::new()
                }
                // Labels whose backoff ended.
                _ = label_retries.tick() => { let now = core.clock.now(); core.state.labelling().retry(now) },
                () = &mut shutdown => return,
            };
            for (kind, namespace) in self.core.state.left_out_to_list() {
                self.governed.list_again(kind, namespace, &mut self.core);
            }
            for (kinds, namespace) in refresh {
                if !kinds.is_empty() {
                    let (core, discovered) = (&mut self.core, &self.discovered);
                    self.governed
                        .refresh(&kinds, namespace.as_deref(), core, discovered);
                }
            }
            self.submit(actions);
        }
    }

    fn submit(&self, actions: Vec<Action>) {
        for action in actions {
            self.executor.submit(action, self.core.state.kinds());
        }
    }
}
