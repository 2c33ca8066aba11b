//! CEL compilation off the async workers. Compiling a policy's or a Cleaner's expressions
//! (parse, checks, cost estimate) takes CPU in proportion to their size; on a tokio worker it
//! would hold up every other admission queued there, the writer checks of annotated objects
//! among them. So every compilation admission asks for runs here: on tokio's blocking threads,
//! at most [`Compilations::max`] at once webhook-wide (a semaphore), each one admission's whole
//! object. The work of one is bounded before it starts: at most
//! [`kube_retention_common::schema_bounds::CONDITIONS`] expressions (a Cleaner's conditions; a
//! policy has five fields for them), each within [`kube_retention_common::cel::shape`]'s bounds
//! (refused past them without being parsed).
//!
//! A compilation outlives a request that timed out (a thread cannot be stopped): it keeps its
//! permit until it ends, so the bound holds whatever the deadlines do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;

/// Compilations running at once by default: one per core of the webhook's usual two, so
/// admissions with CEL can take the machine no further than that, whatever their number.
pub const DEFAULT_MAX_COMPILATIONS: usize = 2;

/// The bound on compilations, and counts of them for metrics and tests.
#[derive(Clone)]
pub struct Compilations {
    permits: Arc<Semaphore>,
    max: usize,
    counts: Arc<Counts>,
    running_gauge: Gauge,
}

#[derive(Default)]
struct Counts {
    running: AtomicUsize,
    peak: AtomicUsize,
    started: AtomicUsize,
}

/// A compilation did not finish: the work panicked (the interpreter's panics are contained
/// inside it; this is anything else).
#[derive(Debug, thiserror::Error)]
#[error("compiling the expressions failed: {0}")]
pub struct Failed(String);

impl Compilations {
    /// At most `max` at once (at least one), counted in `running_gauge`.
    pub fn new(max: usize, running_gauge: Gauge) -> Self {
        let max = max.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            counts: Arc::default(),
            running_gauge,
        }
    }

    /// Runs `work` on a blocking thread once one of the permits is free, and answers with its
    /// result. Dropping the future before a permit is free costs nothing; after, the work runs
    /// on to its end.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Failed> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|closed| Failed(closed.to_string()))?;
        let counts = self.counts.clone();
        let gauge = self.running_gauge.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let running = counts.running.fetch_add(1, Ordering::SeqCst) + 1;
            counts.peak.fetch_max(running, Ordering::SeqCst);
            counts.started.fetch_add(1, Ordering::SeqCst);
            gauge.inc();
            let _running = Running { counts, gauge };
            work()
        })
        .await
        .map_err(|error| Failed(error.to_string()))
    }

    /// The most that may run at once.
    pub fn max(&self) -> usize {
        self.max
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
