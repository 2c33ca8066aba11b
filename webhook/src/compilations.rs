//! CEL compilation off the async workers, each namespace within its share of the time. Compiling
//! a policy's or a Cleaner's expressions (parse, checks, cost estimate) takes CPU in proportion to
//! their size; on a tokio worker it would hold up every other admission queued there, the writer
//! checks of annotated objects among them. So every compilation admission asks for runs here: on
//! tokio's blocking threads, at most [`CompileLimits::at_once`] at once webhook-wide (a
//! semaphore), each one admission's whole object. The work of one is bounded before it starts:
//! at most [`kube_retention_common::schema_bounds::CONDITIONS`] expressions (a Cleaner's
//! conditions; a policy has five fields for them), each within
//! [`kube_retention_common::cel::shape`]'s bounds (refused past them without being parsed).
//!
//! Bounding each compilation does not bound how many a namespace asks for: a tenant sending
//! admissions of the largest expressions one after another (dry runs cost it nothing) would keep
//! the webhook's cores busy and every other tenant's admissions waiting for a turn. So each
//! namespace (cluster-scoped policies together as one) is charged the CPU time its compilations
//! took and credited [`CompileLimits::namespace_share`] of a core as time passes, holding at most
//! [`CompileLimits::namespace_burst`] of credit ([`kube_retention_runtime::time_shares`], as the
//! controller shares its evaluator); a namespace in debt has its admissions with CEL refused,
//! uncompiled, saying when to try again ([`Refused::Throttled`]), while the others' go on. The
//! defaults let everyday policies through by the thousand (microseconds each) and a burst of
//! dozens of the largest; only a namespace that keeps sending the largest is refused.
//!
//! A compilation outlives a request that timed out (a thread cannot be stopped): it keeps its
//! permit until it ends, and is charged, so the bounds hold whatever the deadlines do.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cpu_time::ThreadTime;
use kube_retention_runtime::time_shares::TimeShares;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;

/// Compilations running at once by default: one per core of the webhook's usual two, so
/// admissions with CEL can take the machine no further than that, whatever their number.
pub const DEFAULT_MAX_COMPILATIONS: usize = 2;

/// A namespace's share of one core for compiling, by default: what the controller's evaluator
/// gives each namespace's evaluations (`NAMESPACE_SHARE` in `evaluator/src/lib.rs`).
pub const DEFAULT_NAMESPACE_SHARE: f64 = 0.05;

/// The most compile time a namespace holds in credit, by default: thousands of everyday
/// policies at once, or dozens of the largest a release build compiles (about 30 ms each).
pub const DEFAULT_NAMESPACE_BURST: Duration = Duration::from_secs(1);

/// How much compiling the webhook does: at once, and for each namespace over time.
#[derive(Debug, Clone, Copy)]
pub struct CompileLimits {
    /// Compilations running at once, webhook-wide (at least one).
    pub at_once: usize,
    /// Each namespace's share of one core.
    pub namespace_share: f64,
    /// The most credit a namespace holds.
    pub namespace_burst: Duration,
}

impl Default for CompileLimits {
    fn default() -> Self {
        Self {
            at_once: DEFAULT_MAX_COMPILATIONS,
            namespace_share: DEFAULT_NAMESPACE_SHARE,
            namespace_burst: DEFAULT_NAMESPACE_BURST,
        }
    }
}

/// The bounds on compilations, and counts of them for metrics and tests.
#[derive(Clone)]
pub struct Compilations {
    permits: Arc<Semaphore>,
    limits: CompileLimits,
    shares: Arc<Mutex<TimeShares<String>>>,
    counts: Arc<Counts>,
    running_gauge: Gauge,
}

#[derive(Default)]
struct Counts {
    running: AtomicUsize,
    peak: AtomicUsize,
    started: AtomicUsize,
    throttled: AtomicUsize,
}

/// Why an admission's expressions were not compiled.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Its namespace has used its share of the compile time: it may try again after
    /// `retry_after`.
    #[error(
        "{whose} used {their} share of kube-retention's time for compiling CEL ({share}% of a \
         core, {burst} at once; --namespace-compile-share, --namespace-compile-burst): the \
         expressions of {their} last admissions took that; try again in {after}",
        whose = whose(namespace).0,
        their = whose(namespace).1,
        share = (limits.namespace_share * 1000.0).round() / 10.0,
        burst = humantime::format_duration(limits.namespace_burst),
        after = humantime::format_duration(*retry_after),
    )]
    Throttled {
        namespace: String,
        retry_after: Duration,
        limits: CompileLimits,
    },
    /// The work panicked (the interpreter's panics are contained inside it; this is anything
    /// else), or the webhook is stopping.
    #[error("compiling the expressions failed: {0}")]
    Failed(String),
}

/// Who is refused, and their possessive.
fn whose(namespace: &str) -> (String, &'static str) {
    if namespace.is_empty() {
        ("cluster-scoped policies have".to_owned(), "their")
    } else {
        (format!("namespace {namespace} has"), "its")
    }
}

impl Compilations {
    /// Within `limits`, counting those running in `running_gauge`.
    pub fn new(limits: CompileLimits, running_gauge: Gauge) -> Self {
        let limits = CompileLimits {
            at_once: limits.at_once.max(1),
            ..limits
        };
        Self {
            permits: Arc::new(Semaphore::new(limits.at_once)),
            shares: Arc::new(Mutex::new(TimeShares::new(
                limits.namespace_share,
                limits.namespace_burst,
            ))),
            limits,
            counts: Arc::default(),
            running_gauge,
        }
    }

    /// Runs `work` for `namespace` ("" for cluster-scoped objects) on a blocking thread once one
    /// of the permits is free, and answers with its result; refuses it, unrun, while the
    /// namespace is in debt (asked before waiting and again once a permit is held, so admissions
    /// queued together cannot all spend one credit). Dropping the future before a permit is free
    /// costs nothing; after, the work runs on to its end and is charged.
    pub async fn run<T: Send + 'static>(
        &self,
        namespace: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refused> {
        self.afforded(namespace)?;
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|closed| Refused::Failed(closed.to_string()))?;
        self.afforded(namespace)?;
        let counts = self.counts.clone();
        let gauge = self.running_gauge.clone();
        let shares = self.shares.clone();
        let namespace = namespace.to_owned();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let running = counts.running.fetch_add(1, Ordering::SeqCst) + 1;
            counts.peak.fetch_max(running, Ordering::SeqCst);
            counts.started.fetch_add(1, Ordering::SeqCst);
            gauge.inc();
            let _running = Running { counts, gauge };
            let _charged = Charged {
                shares,
                namespace,
                began: ThreadTime::now(),
            };
            work()
        })
        .await
        .map_err(|error| Refused::Failed(error.to_string()))
    }

    /// Whether `namespace` may compile now.
    fn afforded(&self, namespace: &str) -> Result<(), Refused> {
        let shares = self
            .shares
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let Some(ready) = shares.ready_at(&namespace.to_owned(), now) else {
            return Ok(());
        };
        self.counts.throttled.fetch_add(1, Ordering::SeqCst);
        Err(Refused::Throttled {
            namespace: namespace.to_owned(),
            retry_after: whole_seconds_up(ready.saturating_duration_since(now)),
            limits: self.limits,
        })
    }

    /// The most that ever ran at once.
    pub fn peak(&self) -> usize {
        self.counts.peak.load(Ordering::SeqCst)
    }

    /// How many have started.
    pub fn started(&self) -> usize {
        self.counts.started.load(Ordering::SeqCst)
    }

    /// How many run now.
    pub fn running(&self) -> usize {
        self.counts.running.load(Ordering::SeqCst)
    }

    /// How many were refused, their namespace in debt.
    pub fn throttled(&self) -> usize {
        self.counts.throttled.load(Ordering::SeqCst)
    }
}

/// At least a second, in whole seconds: what `Retry-After` carries.
fn whole_seconds_up(wait: Duration) -> Duration {
    Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
        .max(Duration::from_secs(1))
}

/// One running compilation, counted until its work ends (or unwinds).
struct Running {
    counts: Arc<Counts>,
    gauge: Gauge,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.counts.running.fetch_sub(1, Ordering::SeqCst);
        self.gauge.dec();
    }
}

/// Charges a compilation's CPU time to its namespace when its work ends (or unwinds).
struct Charged {
    shares: Arc<Mutex<TimeShares<String>>>,
    namespace: String,
    began: ThreadTime,
}

impl Drop for Charged {
    fn drop(&mut self) {
        let took = self.began.elapsed();
        self.shares
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .charge(&self.namespace, took, Instant::now());
    }
}
