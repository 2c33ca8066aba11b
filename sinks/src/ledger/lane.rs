//! One set of [`Lanes`] and the task that delivers from them: the tenants' (policies' sinks,
//! Cleaners' sinks) or the admin's (`--ledger-sink`), each with its own queue, slots and task,
//! so neither can fill or hold the other's.
//!
//! The task starts what [`Lanes::next`] lets go, each attempt in a task of its own within a
//! [`JoinSet`] (so at most [`Limits::in_flight`] at once), and takes each back as it ends: a
//! failure puts the item back for its sink's next turn, never sleeps in a slot. Whoever waits
//! for an item (a Cleaner, for its Warning Event) hears of a failure no sooner than its last
//! attempt's whole timeout after that attempt began, as a tenant did before: how long a failure
//! took says nothing about what answered.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube_retention_runtime::supervise::{self, Supervised};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::lanes::{Item, Lanes, Limits};
use super::metrics::{LedgerMetrics, SinkLabels};
use crate::{Attempted, Sender, Undelivered};

/// A set of lanes and its delivery task; clones share them.
#[derive(Clone)]
pub struct Lane {
    lanes: Arc<Mutex<Lanes>>,
    wake: Arc<Notify>,
    metrics: LedgerMetrics,
}

impl Lane {
    /// Starts the task `name` delivering through `sender` within `limits`.
    pub fn spawn(
        name: &'static str,
        sender: Arc<Sender>,
        limits: Limits,
        metrics: LedgerMetrics,
    ) -> (Self, Supervised) {
        let lane = Self {
            lanes: Arc::new(Mutex::new(Lanes::new(limits))),
            wake: Arc::new(Notify::new()),
            metrics,
        };
        let task = deliver(lane.clone(), sender);
        (lane, supervise::spawn(name, task))
    }

    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item`; one dropped to make room is counted and told.
    pub fn push(&self, item: Item) {
        let dropped = self.lanes().push(item);
        self.wake.notify_one();
        if let Some(dropped) = dropped {
            if let Some(label) = &dropped.label {
                self.metrics.dropped.get_or_create(label).inc();
            }
            tracing::warn!(sink = %dropped.sink, namespace = %dropped.namespace, "CloudEvent queue full: the oldest of the longest queue dropped");
            let full = "the controller's queue of CloudEvents was full".to_owned();
            dropped.end(Err(Undelivered::Unsendable(full)));
        }
    }

    /// Items waiting and attempts under way.
    pub fn load(&self) -> (usize, usize) {
        let lanes = self.lanes();
        (lanes.queued(), lanes.in_flight())
    }
}

/// An attempt that ended: the item, when it began, and what came of it.
type Ended = (Item, Instant, Attempted);

/// A failure to report once its attempt's whole timeout has passed, by the time it is due.
struct Report {
    at: Instant,
    seq: u64,
    item: Item,
}

impl PartialEq for Report {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Report {}

impl PartialOrd for Report {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Report {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

async fn deliver(lane: Lane, sender: Arc<Sender>) {
    // Nothing is judged before the policy has heard from everything it learns from.
    sender.settled().await;
    let timeout = lane.lanes().limits().delivery.timeout;
    let mut attempts: JoinSet<Ended> = JoinSet::new();
    let mut reports: BinaryHeap<Reverse<Report>> = BinaryHeap::new();
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        while let Some(Reverse(report)) = reports.peek()
            && report.at <= now
        {
            let Some(Reverse(report)) = reports.pop() else {
                break;
            };
            let attempts = report.item.attempts;
            report.item.end(Err(Undelivered::Failed { attempts }));
        }
        let wake_at = {
            let mut lanes = lane.lanes();
            while let Some(item) = lanes.next(now) {
                let sender = sender.clone();
                attempts.spawn(async move {
                    let started = Instant::now();
                    let attempted = sender
                        .attempt(&item.sink, item.event.clone(), timeout)
                        .await;
                    (item, started, attempted)
                });
            }
            lanes.wake_at(now)
        };
        let report_at = reports.peek().map(|Reverse(report)| report.at);
        let wake_at = [wake_at, report_at].into_iter().flatten().min();
        tokio::select! {
            Some(ended) = attempts.join_next(), if !attempts.is_empty() => {
                let Ok((item, started, attempted)) = ended else {
                    continue;
                };
                if let Some(exhausted) = settle(&lane, item, started, attempted) {
                    seq += 1;
                    let at = started + timeout;
                    reports.push(Reverse(Report { at, seq, item: exhausted }));
                }
            }
            () = lane.wake.notified() => {}
            () = sleep_until(wake_at), if wake_at.is_some() => {}
        }
    }
}

/// Takes an attempt back: counted, and told where it ended; the item whose attempts are spent,
/// to be reported.
fn settle(lane: &Lane, item: Item, started: Instant, attempted: Attempted) -> Option<Item> {
    let metrics = &lane.metrics;
    let error = match attempted {
        Attempted::Delivered => {
            lane.lanes().delivered(&item);
            count(&metrics.delivered, &item);
            item.end(Ok(()));
            return None;
        }
        Attempted::Refused(refusal) => {
            lane.lanes().ended(&item);
            count(&metrics.undelivered, &item);
            let note = Undelivered::Refused(refusal.clone()).note(&item.sink);
            tracing::warn!(%note, "CloudEvent refused");
            item.end(Err(Undelivered::Refused(refusal)));
            return None;
        }
        Attempted::Unsendable(error) => {
            lane.lanes().ended(&item);
            count(&metrics.undelivered, &item);
            tracing::warn!(sink = %item.sink, %error, "CloudEvent not sendable");
            item.end(Err(Undelivered::Unsendable(error)));
            return None;
        }
        Attempted::Failed(error) => error,
    };
    tracing::debug!(sink = %item.sink, attempt = item.attempts + 1, %error, "CloudEvent not delivered");
    let exhausted = lane.lanes().failed(item, started)?;
    count(&metrics.undelivered, &exhausted);
    let note = Undelivered::Failed {
        attempts: exhausted.attempts,
    }
    .note(&exhausted.sink);
    tracing::warn!(%note, "CloudEvent undelivered");
    Some(exhausted)
}

/// Counts `item` in `family` if it is a ledger event.
fn count(family: &Family<SinkLabels, Counter>, item: &Item) {
    if let Some(label) = &item.label {
        family.get_or_create(label).inc();
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
