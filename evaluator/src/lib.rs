//! Tenants' CEL — retention policies' `match`, `finished` and `holdWhile`, Cleaners'
//! conditions — evaluated on a thread of its own, never on a loop that schedules deletions. An
//! expression may take up to its cost limit (tens of milliseconds) on every object of a
//! namespace; on a loop, one tenant's policy would hold up every other tenant's deadlines.
//!
//! Here it holds up at most its own namespace. Work waits in one lane per namespace
//! ([`backlog`]), coalesced by object or Cleaner and bounded in memory, and is served a step at a
//! time — one expression on one object ([`work`]) — namespaces taking turns, as API Priority
//! and Fairness serves the API server's flows. Each namespace takes at most its own share of a
//! core ([`NAMESPACE_SHARE`], [`kube_retention_runtime::time_shares`]): a tenant whose expressions run to their limit waits for its
//! namespace's time while the others' turns go on, so it gets no more of the machine by writing
//! them.
//!
//! The expressions themselves run in a child process that the operating system holds to its
//! memory, CPU time and stack ([`sandbox`]): whatever an expression makes the interpreter do, it
//! can end that process, never the controller. The thread drives it one step at a time.
//!
//! A thread rather than tokio's blocking pool: driving the process is blocking work that never
//! awaits. The thread and its process take at most [`CPU_SHARE`] of one core, whatever tenants
//! ask: after each step the thread rests in proportion to the time the step took in both (rests
//! shorter than [`MIN_REST`] are added up first), so everyday expressions, which take
//! microseconds, never wait, and expressions stopped at their limit cannot keep a core busy.
//! Steps are charged in CPU time, the thread's and the process's. Both run at the lowest
//! priority (nice 19), so that where cores are contended the loops, the executor and the API
//! server come first.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as channel;
use std::time::{Duration, Instant};

use cpu_time::ThreadTime;
use kube_retention_runtime::supervise::{self, Supervised};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use thread_priority::{ThreadPriority, set_current_thread_priority};

use kube_retention_runtime::time_shares::TimeShares;

pub mod backlog;
pub mod bounds;
pub mod compile;
mod lane;
pub mod policy;
pub mod sandbox;
pub mod work;

pub use backlog::Backlog;
pub use bounds::{Bounds, Dropped};
pub use compile::{Compilation, Compile, Compiled, Deliver, PolicyCompile};
pub use lane::YIELD_EVERY;
pub use policy::{Evaluated, Job, PolicyOutcome, PolicyWork, value_bytes};
pub use sandbox::{Limits, Program, Sandbox, SandboxMetrics};
pub use work::{Progress, Work, WorkKey};

/// A namespace's share of one core: what its evaluations may take, over time.
pub const NAMESPACE_SHARE: f64 = 0.05;

/// The most credit a namespace holds: a quiet namespace's burst (a list of thousands of everyday
/// objects at start) goes at once.
pub const NAMESPACE_BURST: Duration = Duration::from_millis(250);

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
    pub sandbox: SandboxMetrics,
}

impl EvaluatorMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            sandbox: SandboxMetrics::register(registry),
            ..Self::default()
        };
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

    /// Sets the gauges from `backlog`, and counts what it dropped since `counted`, which it
    /// brings up to date.
    fn observe(&self, backlog: &Backlog, counted: &mut Dropped) {
        let gauge = |bytes: usize| i64::try_from(bytes).unwrap_or(i64::MAX);
        let (queued, started) = backlog.bytes();
        self.queued_bytes.set(gauge(queued));
        self.started_bytes.set(gauge(started));
        let dropped = backlog.dropped();
        self.superseded
            .inc_by(dropped.superseded.saturating_sub(counted.superseded));
        self.shed.inc_by(dropped.shed.saturating_sub(counted.shed));
        *counted = dropped;
    }
}

/// What a loop sends the evaluator's thread.
pub enum Submission {
    /// Work, and the room it takes on the way, given back as the thread takes it in (none for
    /// work handed to [`serve`] directly).
    Work(Box<dyn Work>, Option<OnTheWay>),
    /// Work shed on its way, for want of room on it ([`SENT_BOUND`]): its token.
    Shed(Box<dyn Work>),
    /// Shed work asked for again will not come back ([`Backlog::nothing_returned`]).
    NothingReturned,
}

impl From<Box<dyn Work>> for Submission {
    fn from(work: Box<dyn Work>) -> Self {
        Submission::Work(work, None)
    }
}

/// The room a work takes on the way to the thread ([`SENT_BOUND`]), given back when dropped.
pub struct OnTheWay {
    weight: usize,
    sent: Arc<AtomicUsize>,
}

impl Drop for OnTheWay {
    fn drop(&mut self) {
        self.sent.fetch_sub(self.weight, Ordering::Relaxed);
    }
}

/// What work on its way to the evaluator's thread may weigh, sent and not yet taken into its
/// backlog (whose own bounds apply from there): past it, work goes shed, as its token, and is
/// asked for again at its turn. Without it, a loop sending objects faster than the thread,
/// resting at the lowest priority, takes them in held them all on the way: 30 Jobs of 20,000
/// `env` entries, 13 MiB each as decoded, came to hundreds of MiB (docs/explanation/tenancy.md).
pub const SENT_BOUND: usize = 32 * 1024 * 1024;

/// The way to the evaluator's thread: cloned by every loop that submits work.
#[derive(Clone)]
pub struct Evaluator {
    work: channel::Sender<Submission>,
    /// The weight of the work sent and not yet taken in.
    sent: Arc<AtomicUsize>,
}

impl Evaluator {
    /// Starts the thread, `cel-evaluator`, evaluating in a process started from `program`
    /// held to `limits`, and answers it for a supervisor: it ends once every [`Evaluator`] is
    /// dropped and the work queued is done.
    pub fn spawn(
        metrics: EvaluatorMetrics,
        program: Program,
        limits: Limits,
    ) -> std::io::Result<(Self, Supervised)> {
        Self::spawn_with(
            metrics,
            TimeShares::new(NAMESPACE_SHARE, NAMESPACE_BURST),
            Bounds::default(),
            (program, limits),
        )
    }

    /// Like [`Evaluator::spawn`], each namespace's time shared by `shares` and the backlog
    /// held within `bounds`.
    pub fn spawn_with(
        metrics: EvaluatorMetrics,
        shares: TimeShares<Arc<str>>,
        bounds: Bounds,
        (program, limits): (Program, Limits),
    ) -> std::io::Result<(Self, Supervised)> {
        let (work, queued) = channel::channel();
        let thread = supervise::thread("cel-evaluator", move || {
            if let Err(error) = set_current_thread_priority(ThreadPriority::Min) {
                tracing::warn!(%error, "could not lower the CEL evaluator's priority");
            }
            let sandbox = Sandbox::new(program, limits, metrics.sandbox.clone());
            serve(&queued, shares, bounds, sandbox, &metrics);
        })?;
        let sent = Arc::default();
        Ok((Self { work, sent }, thread))
    }

    /// Queues `work`; false once the thread has ended.
    pub fn submit(&self, work: Box<dyn Work>) -> bool {
        let weight = work.weight();
        let reserved = self
            .sent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sent| {
                sent.checked_add(weight)
                    .filter(|total| *total <= SENT_BOUND)
            })
            .is_ok();
        // Work coming back from being shed is never shed again (so that it finishes): it is
        // sent whatever its weight, and the backlog's bound on returns holds it.
        if !reserved && !work.returning() {
            return self.work.send(Submission::Shed(work.shed())).is_ok();
        }
        if !reserved {
            self.sent.fetch_add(weight, Ordering::Relaxed);
        }
        let on_the_way = OnTheWay {
            weight,
            sent: self.sent.clone(),
        };
        let submission = Submission::Work(work, Some(on_the_way));
        self.work.send(submission).is_ok()
    }

    /// Queues `work` shed at once, as its token: there was no room to make it (its object's
    /// JSON, [`policy::value_bytes`], in the controller's budget of decoded objects). False once
    /// the thread has ended.
    pub fn shed(&self, work: Box<dyn Work>) -> bool {
        self.work.send(Submission::Shed(work.shed())).is_ok()
    }

    /// Says that shed work asked for again will not come back: it went, or newer work
    /// replaced it, or nothing is to be evaluated of it any more.
    pub fn nothing_returned(&self) {
        // The thread gone, the controller is stopping: nothing to bound any more.
        self.work.send(Submission::NothingReturned).ok();
    }
}

/// The thread's body: serves what `queued` brings until it closes and the backlog is done, a
/// step at a time in `sandbox`, each namespace's time shared by `shares`, the backlog within
/// `bounds`; public so that tests can drive it.
pub fn serve(
    queued: &channel::Receiver<Submission>,
    mut shares: TimeShares<Arc<str>>,
    bounds: Bounds,
    mut sandbox: Sandbox,
    metrics: &EvaluatorMetrics,
) {
    let mut backlog = Backlog::new(bounds);
    let mut owed = Duration::ZERO;
    let mut open = true;
    let mut counted = Dropped::default();
    loop {
        if backlog.is_empty() {
            match queued.recv() {
                Ok(submission) => take(&mut backlog, submission),
                Err(_) => return,
            }
        }
        while let Ok(submission) = queued.try_recv() {
            take(&mut backlog, submission);
        }
        let now = Instant::now();
        let started = ThreadTime::now();
        let turn = backlog.step(
            |namespace| shares.ready_at(namespace, now).is_none(),
            &mut sandbox,
        );
        let Some(turn) = turn else {
            metrics.observe(&backlog, &mut counted);
            // Every namespace with work is in debt, or waits for room: wait for the first to
            // pay its debt off, or for what the loops send (new work, perhaps a namespace's
            // that is not in debt; shed work coming back).
            let next = backlog.namespaces();
            let until = next
                .filter_map(|namespace| shares.ready_at(namespace, now))
                .min();
            let received = match (until, open) {
                (Some(until), true) => {
                    match queued.recv_timeout(until.saturating_duration_since(now)) {
                        Ok(submission) => Some(submission),
                        Err(channel::RecvTimeoutError::Timeout) => None,
                        // No more work will come; what is queued is still served.
                        Err(channel::RecvTimeoutError::Disconnected) => {
                            open = false;
                            None
                        }
                    }
                }
                (None, true) => match queued.recv() {
                    Ok(submission) => Some(submission),
                    Err(_) => return,
                },
                (Some(until), false) => {
                    std::thread::sleep(until.saturating_duration_since(now));
                    None
                }
                // Nothing can go and nothing more will come: shed work will not come back.
                (None, false) => return,
            };
            if let Some(submission) = received {
                take(&mut backlog, submission);
            }
            continue;
        };
        // Charged the CPU time the step took, here and in the process, not the time it was
        // away: at the lowest priority on a loaded machine, the step waits many times longer
        // than it runs, and a tenant charged for that wait would get far less than its share.
        let took = started.elapsed() + sandbox.take_cpu();
        shares.charge(&turn.namespace, took, Instant::now());
        if let Some(done) = turn.done {
            done.finish();
        }
        metrics.observe(&backlog, &mut counted);
        owed += took.mul_f64((1.0 - CPU_SHARE) / CPU_SHARE);
        if owed >= MIN_REST {
            std::thread::sleep(owed);
            owed = Duration::ZERO;
        }
    }
}

fn take(backlog: &mut Backlog, submission: Submission) {
    match submission {
        // Taken in: the backlog's bounds hold it from here, and its room on the way is free.
        Submission::Work(work, _on_the_way) => backlog.push(work),
        Submission::Shed(token) => backlog.push_shed(token),
        Submission::NothingReturned => backlog.nothing_returned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work of `weight` bytes of `key`, returning or not.
    struct Heavy {
        key: &'static str,
        weight: usize,
        returning: bool,
    }

    impl Work for Heavy {
        fn namespace(&self) -> &Arc<str> {
            static TEAM: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
            TEAM.get_or_init(|| Arc::from("team-a"))
        }

        fn key(&self) -> WorkKey {
            WorkKey::Cleaner(Arc::from(self.key))
        }

        fn step(&mut self, _: &mut Sandbox) -> Progress {
            Progress::Done
        }

        fn weight(&self) -> usize {
            self.weight
        }

        fn finish(self: Box<Self>) {}

        fn shed(self: Box<Self>) -> Box<dyn Work> {
            work::Token::asking_again(self.namespace().clone(), self.key(), || {})
        }

        fn returning(&self) -> bool {
            self.returning
        }
    }

    fn heavy(key: &'static str, returning: bool) -> Box<dyn Work> {
        Box::new(Heavy {
            key,
            weight: 10 * 1024 * 1024,
            returning,
        })
    }

    fn shape(submission: &Submission) -> &'static str {
        match submission {
            Submission::Work(..) => "work",
            Submission::Shed(_) => "shed",
            Submission::NothingReturned => "nothing returned",
        }
    }

    /// Work the thread has not taken in holds at most SENT_BOUND on the way: past it, work goes
    /// as its token; taken in, its room is free again; work coming back goes whatever the room.
    #[test]
    fn work_on_the_way_past_its_bound_goes_shed() {
        let (work, queued) = channel::channel();
        let evaluator = Evaluator {
            work,
            sent: Arc::default(),
        };
        for key in ["a", "b", "c", "d", "e"] {
            assert!(evaluator.submit(heavy(key, false)));
        }
        let sent: Vec<Submission> = queued.try_iter().take(5).collect();
        let shapes: Vec<&str> = sent.iter().map(shape).collect();
        assert_eq!(shapes, ["work", "work", "work", "shed", "shed"]);
        assert_eq!(evaluator.sent.load(Ordering::Relaxed), 30 * 1024 * 1024);
        assert!(evaluator.submit(heavy("back", true)));
        let back = queued.try_recv().unwrap();
        assert_eq!(shape(&back), "work", "coming back");
        assert_eq!(evaluator.sent.load(Ordering::Relaxed), 40 * 1024 * 1024);
        // The first three taken in: only what came back is on the way.
        drop(sent);
        assert_eq!(evaluator.sent.load(Ordering::Relaxed), 10 * 1024 * 1024);
        for key in ["f", "g", "h"] {
            assert!(evaluator.submit(heavy(key, false)));
        }
        let shapes: Vec<&str> = queued.try_iter().map(|sent| shape(&sent)).collect();
        assert_eq!(shapes, ["work", "work", "shed"]);
        drop(back);
        assert_eq!(evaluator.sent.load(Ordering::Relaxed), 0);
    }
}
