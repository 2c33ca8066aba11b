//! Status writes, off the loops and retried: the one writer of retention policies' and
//! Cleaners' statuses. A loop computes an object's status and hands it over when it changes; the
//! task here (the supervised `status-writer`) merge-patches the status subresource. A failed
//! write (the API server unavailable, a conflict, throttling) is retried with exponential
//! backoff ([`RETRY`]: backon's, with jitter, never giving up), so a status does not stay stale
//! until the computed one changes. A newer status supersedes a pending retry and is written at
//! once with its backoff reset; writes of one object never overlap, so an older status cannot
//! land after a newer one. A write the API server refuses as such (the object gone: 404; a
//! patch it rejects: 400, 422) is not retried. A loop forgets a deleted object's writes. Only
//! the leader writes: the writer follows leadership itself, dropping every pending write when
//! this replica stops leading (the new leader writes; retries of ours could land after its) and
//! any write handed to it while it does not lead.
//!
//! Statuses are tenants' objects' (every namespace editor writes policies and Cleaners), so
//! their writes are bounded like every other write: each waits for the controller's request
//! budget ([`Budget`], `--qps`, shared with the deletions), at most [`WRITING`] are under way at
//! once, and at most one of each namespace's, so a tenant whose ten thousand Cleaners change
//! status takes one place among them, not all of them, and another namespace's status waits for
//! no more than a round of the others.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client};
use kube_retention_runtime::supervise::{self, Supervised};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::budget::Budget;

/// The object whose status is written: its resource, namespace (if any) and name.
pub type StatusOf = ObjectRef<DynamicObject>;

/// Retries of a failed write: 1 s doubling to 5 min, each with up to as much again of jitter
/// (replicas and policies do not retry in step), for as long as the write fails.
pub const RETRY: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_secs(1))
    .with_max_delay(Duration::from_secs(300))
    .with_jitter()
    .without_max_times();

/// Status writes under way at once (each waiting for its share of the budget first).
pub const WRITING: usize = 4;

/// Hands statuses to the writer task; cheap to clone.
#[derive(Clone)]
pub struct StatusWrites {
    requests: mpsc::UnboundedSender<Request>,
}

enum Request {
    Write(StatusOf, Value),
    Forget(StatusOf),
}

impl StatusWrites {
    /// Starts the writer task, retrying on `retry`'s schedule, each write within `budget`, and
    /// writing while `leadership` says this replica leads, and answers it for a supervisor; it
    /// ends once every [`StatusWrites`] is dropped.
    pub fn spawn(
        client: Client,
        retry: ExponentialBuilder,
        budget: Budget,
        leadership: watch::Receiver<bool>,
    ) -> (Self, Supervised) {
        let (requests, received) = mpsc::unbounded_channel();
        let writer = Writer {
            client,
            retry,
            budget,
            leadership,
            slots: HashMap::new(),
            next_id: 0,
            writing: FuturesUnordered::new(),
            namespaces_writing: HashSet::new(),
        };
        let task = supervise::spawn("status-writer", writer.run(received));
        (Self { requests }, task)
    }

    /// Writes `status` for `key`, in place of any status of it not yet written.
    pub fn write(&self, key: StatusOf, status: Value) {
        self.requests.send(Request::Write(key, status)).ok();
    }

    /// Drops what is pending for `key` (deleted).
    pub fn forget(&self, key: &StatusOf) {
        self.requests.send(Request::Forget(key.clone())).ok();
    }
}

/// An object's writes. `id` tells a write of this slot from one of a forgotten predecessor.
struct Slot {
    id: u64,
    /// The status to write next, if any.
    pending: Option<Value>,
    /// Whether a write is under way.
    writing: bool,
    /// When `pending` may be written.
    due: Instant,
    /// While writes keep failing: the delays before the next retries.
    backoff: Option<ExponentialBackoff>,
}

/// A write that came back.
struct Written {
    key: StatusOf,
    id: u64,
    status: Value,
    result: kube::Result<()>,
}

struct Writer {
    client: Client,
    retry: ExponentialBuilder,
    /// The request budget every write waits for.
    budget: Budget,
    /// Whether this replica leads: only the leader writes.
    leadership: watch::Receiver<bool>,
    slots: HashMap<StatusOf, Slot>,
    next_id: u64,
    writing: FuturesUnordered<BoxFuture<'static, Written>>,
    /// The namespaces with a write under way (`None`: objects outside any).
    namespaces_writing: HashSet<Option<String>>,
}

impl Writer {
    async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        loop {
            let now = Instant::now();
            self.start_due(now);
            // Writes due already wait for a place: the end of a write under way wakes them.
            let next_due = self
                .slots
                .values()
                .filter(|slot| slot.pending.is_some() && !slot.writing && slot.due > now)
                .map(|slot| slot.due)
                .min();
            tokio::select! {
                request = requests.recv() => match request {
                    Some(request) => self.apply(request),
                    None => return,
                },
                Some(written) = self.writing.next(), if !self.writing.is_empty() => {
                    self.finished(written);
                }
                () = sleep_until(next_due), if next_due.is_some() => {}
                Ok(()) = self.leadership.changed() => {
                    if !*self.leadership.borrow_and_update() {
                        self.slots.clear();
                    }
                }
            }
        }
    }

    fn apply(&mut self, request: Request) {
        match request {
            Request::Write(..) if !*self.leadership.borrow() => {}
            Request::Write(key, status) => {
                let next_id = &mut self.next_id;
                let slot = self.slots.entry(key).or_insert_with(|| {
                    *next_id += 1;
                    Slot {
                        id: *next_id,
                        pending: None,
                        writing: false,
                        due: Instant::now(),
                        backoff: None,
                    }
                });
                slot.pending = Some(status);
                slot.due = Instant::now();
                slot.backoff = None;
            }
            Request::Forget(key) => {
                self.slots.remove(&key);
            }
        }
    }

    /// Starts the writes that are due, one at a time per object and per namespace, at most
    /// [`WRITING`] at once.
    fn start_due(&mut self, now: Instant) {
        for (key, slot) in &mut self.slots {
            if self.writing.len() >= WRITING {
                return;
            }
            if slot.writing || slot.due > now || self.namespaces_writing.contains(&key.namespace) {
                continue;
            }
            let Some(status) = slot.pending.take() else {
                continue;
            };
            slot.writing = true;
            self.namespaces_writing.insert(key.namespace.clone());
            let (client, key, id) = (self.client.clone(), key.clone(), slot.id);
            let budget = self.budget.clone();
            self.writing.push(Box::pin(async move {
                budget.acquire().await;
                let result = patch(client, &key, &status).await;
                Written {
                    key,
                    id,
                    status,
                    result,
                }
            }));
        }
    }

    fn finished(&mut self, written: Written) {
        let Written {
            key,
            id,
            status,
            result,
        } = written;
        self.namespaces_writing.remove(&key.namespace);
        let Some(slot) = self.slots.get_mut(&key).filter(|slot| slot.id == id) else {
            return; // Forgotten meanwhile.
        };
        slot.writing = false;
        let error = match result {
            Ok(()) => {
                slot.backoff = None;
                if slot.pending.is_none() {
                    self.slots.remove(&key);
                }
                return;
            }
            Err(error) => error,
        };
        if slot.pending.is_some() {
            tracing::warn!(object = %key, %error, "writing the status failed; a newer status replaces it");
        } else if !retriable(&error) {
            tracing::warn!(object = %key, %error, "writing the status failed; not retried");
            self.slots.remove(&key);
        } else {
            let retry = self.retry;
            let delay = slot
                .backoff
                .get_or_insert_with(|| retry.build())
                .next()
                .unwrap_or(Duration::from_secs(300));
            tracing::warn!(object = %key, %error, retry_in = ?delay, "writing the status failed; retrying");
            slot.pending = Some(status);
            slot.due = Instant::now() + delay;
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// Whether a write that failed with `error` may succeed when repeated: not when the object is
/// gone, the API server rejects the patch itself, or the status or the answer cannot be
/// (de)serialized.
fn retriable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => !matches!(status.code, 400 | 404 | 422),
        kube::Error::SerdeError(_) => false,
        _ => true,
    }
}

/// Merge-patches the status subresource of `key` to `status`.
async fn patch(client: Client, key: &StatusOf, status: &Value) -> kube::Result<()> {
    let api: Api<DynamicObject> = match &key.namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &key.dyntype),
        None => Api::all_with(client, &key.dyntype),
    };
    let patch = Patch::Merge(json!({ "status": status }));
    api.patch_status(&key.name, &PatchParams::default(), &patch)
        .await
        .map(|_| ())
}
