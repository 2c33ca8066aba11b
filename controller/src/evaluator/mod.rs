//! Tenants' CEL — retention policies' `match`, `finished` and `holdWhile`, Cleaners'
//! conditions — evaluated on a thread of its own, never on a loop that schedules deletions. An
//! expression may take up to its cost limit (tens of milliseconds) on every object of a
//! namespace; on a loop, one tenant's policy would hold up every other tenant's deadlines.
//!
//! Here it holds up at most its own namespace. Work waits in one lane per namespace
//! ([`backlog`]), coalesced by object or Cleaner and bounded in memory, and is served a step at a
//! time — one expression on one object ([`work`]) — namespaces taking turns, as API Priority
//! and Fairness serves the API server's flows. Each namespace takes at most its own share of a
//! core ([`crate::time_shares`]): a tenant whose expressions run to their limit waits for its
//! namespace's time while the others' turns go on, so it gets no more of the machine by writing
//! them.
//!
//! A thread rather than tokio's blocking pool: evaluation is CPU work that never awaits. The
//! thread takes at most [`CPU_SHARE`] of one core, whatever tenants ask: after each step it
//! rests in proportion to the time it took (rests shorter than [`MIN_REST`] are added up
//! first), so everyday expressions, which take microseconds, never wait, and expressions
//! stopped at their limit cannot keep a core busy. It also runs at the lowest priority (nice
//! 19), so that where cores are contended the loops, the executor and the API server come first.

use std::sync::Arc;
use std::sync::mpsc as channel;
use std::time::{Duration, Instant};

use kube_retention_runtime::supervise::{self, Supervised};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use thread_priority::{ThreadPriority, set_current_thread_priority};

use crate::time_shares::TimeShares;

pub mod backlog;
pub mod policy;
pub mod work;

pub use backlog::{Backlog, Bounds, Dropped};
pub use policy::{Evaluated, Job, PolicyOutcome, PolicyWork, evaluate};
pub use work::{Progress, Work, WorkKey};

/// The most of one core evaluations take.
pub const CPU_SHARE: f64 = 0.25;

/// Rest owed is taken once it reaches this (sleeping for less costs more than it rests).
pub const MIN_REST: Duration = Duration::from_millis(5);

/// The evaluator's own metrics.
#[derive(Debug, Clone, Default)]
pub struct EvaluatorMetrics {
    pub superseded: Counter,
    pub shed: Counter,
    pub queued_bytes: Gauge,
    pub started_bytes: Gauge,
}

impl EvaluatorMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "evaluations_superseded",
            "Queued CEL evaluations replaced by a newer version of their object or Cleaner before they were done",
            metrics.superseded.clone(),
        );
        registry.register(
            "evaluations_shed",
            "Queued CEL evaluations let go of to keep the evaluator's backlog within its memory bound (fetched again at their turn)",
            metrics.shed.clone(),
        );
        registry.register(
            "evaluation_queued_bytes",
            "What the CEL evaluations waiting to start hold, about",
            metrics.queued_bytes.clone(),
        );
        registry.register(
            "evaluation_started_bytes",
            "What the CEL evaluations under way hold, about",
            metrics.started_bytes.clone(),
        );
        metrics
    }

    fn observe(&self, backlog: &Backlog, before: Dropped) {
        let gauge = |bytes: usize| i64::try_from(bytes).unwrap_or(i64::MAX);
        let (queued, started) = backlog.bytes();
        self.queued_bytes.set(gauge(queued));
        self.started_bytes.set(gauge(started));
        let dropped = backlog.dropped();
        self.superseded
            .inc_by(dropped.superseded.saturating_sub(before.superseded));
        self.shed.inc_by(dropped.shed.saturating_sub(before.shed));
    }
}

/// The way to the evaluator's thread: cloned by every loop that submits work.
#[derive(Clone)]
pub struct Evaluator {
    work: channel::Sender<Box<dyn Work>>,
}

impl Evaluator {
    /// Starts the thread, `cel-evaluator`, and answers it for a supervisor: it ends once every
    /// [`Evaluator`] is dropped and the work queued is done.
    pub fn spawn(metrics: EvaluatorMetrics) -> std::io::Result<(Self, Supervised)> {
        let (work, queued) = channel::channel();
        let thread = supervise::thread("cel-evaluator", move || {
            if let Err(error) = set_current_thread_priority(ThreadPriority::Min) {
                tracing::warn!(%error, "could not lower the CEL evaluator's priority");
            }
            serve(&queued, TimeShares::default(), Bounds::default(), &metrics);
        })?;
        Ok((Self { work }, thread))
    }

    /// Queues `work`; false once the thread has ended.
    pub fn submit(&self, work: Box<dyn Work>) -> bool {
        self.work.send(work).is_ok()
    }
}

/// The thread's body: serves what `queued` brings until it closes and the backlog is done, a
/// step at a time, each namespace's time shared by `shares`, the backlog within `bounds`;
/// public so that tests can drive it.
pub fn serve(
    queued: &channel::Receiver<Box<dyn Work>>,
    mut shares: TimeShares<Arc<str>>,
    bounds: Bounds,
    metrics: &EvaluatorMetrics,
) {
    let mut backlog = Backlog::new(bounds);
    let mut owed = Duration::ZERO;
    let mut open = true;
    loop {
        let before = backlog.dropped();
        if backlog.is_empty() {
            match queued.recv() {
                Ok(work) => backlog.push(work),
                Err(_) => return,
            }
        }
        while let Ok(work) = queued.try_recv() {
            backlog.push(work);
        }
        let now = Instant::now();
        let started = Instant::now();
        let turn = backlog.step(|namespace| shares.ready_at(namespace, now).is_none());
        let Some(turn) = turn else {
            metrics.observe(&backlog, before);
            // Every namespace with work is in debt: wait for the first to pay it off, or for
            // new work (perhaps a namespace's that is not).
            let next = backlog.namespaces();
            let until = next
                .filter_map(|namespace| shares.ready_at(namespace, now))
                .min();
            let wait = until.map_or(MIN_REST, |until| until.saturating_duration_since(now));
            if !open {
                std::thread::sleep(wait);
                continue;
            }
            match queued.recv_timeout(wait) {
                Ok(work) => backlog.push(work),
                Err(channel::RecvTimeoutError::Timeout) => {}
                // No more work will come; what is queued is still served.
                Err(channel::RecvTimeoutError::Disconnected) => open = false,
            }
            continue;
        };
        let took = started.elapsed();
        shares.charge(&turn.namespace, took, started + took);
        if let Some(done) = turn.done {
            done.finish();
        }
        metrics.observe(&backlog, before);
        owed += took.mul_f64((1.0 - CPU_SHARE) / CPU_SHARE);
        if owed >= MIN_REST {
            std::thread::sleep(owed);
            owed = Duration::ZERO;
        }
    }
}
