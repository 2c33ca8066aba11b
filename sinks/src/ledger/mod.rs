//! The deletion ledger: each deletion (and each notice) announced as a CloudEvent to the
//! governing policy's `spec.sink` and to the controller's `--ledger-sink`, at least once.
//!
//! Announcements wait in one bounded queue (`--ledger-queue`) and are delivered by a task of
//! their own, at most [`IN_FLIGHT`] at a time, each retried with backoff ([`Delivery`]); the
//! event's id is the object's uid and the event's type, so a consumer can drop a repeat. A full
//! queue drops the announcement and counts it, as does a delivery that fails every attempt or
//! that the sink policy refuses: a ledger that cannot keep up never slows a deletion. Where a
//! deletion must not go unannounced, the policy sets `archiveBeforeDelete`: the executor then
//! delivers before the DELETE and deletes only on a 2xx ([`archive`]), so nothing is dropped
//! because nothing is deleted first.

use std::sync::Arc;

use cloudevents::Event;
use kube_retention_common::ledger::Entry;
use kube_retention_runtime::supervise::{self, Supervised};
use tokio::sync::{Semaphore, mpsc};

use crate::{Delivery, Sender, Undelivered};

pub mod archive;
pub mod metrics;

pub use metrics::{LedgerMetrics, SinkLabels};

/// Deliveries under way at once.
pub const IN_FLIGHT: usize = 16;

/// The source of the ledger's events.
pub const SOURCE: &str = "kube-retention-controller";

/// Where an announcement goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// The governing policy's `spec.sink`.
    Policy,
    /// The controller's `--ledger-sink`.
    Cluster,
}

impl Destination {
    pub fn label(self) -> SinkLabels {
        SinkLabels {
            sink: match self {
                Self::Policy => "policy",
                Self::Cluster => "cluster",
            },
        }
    }
}

/// One event for one sink.
#[derive(Debug, Clone)]
pub struct Announcement {
    pub sink: Arc<str>,
    pub destination: Destination,
    pub event: Event,
}

/// The event of `event_type` carrying `entry` ([`crate::ledger_event`]); `None`
/// (logged) if it cannot be built.
pub fn event(event_type: &str, entry: &Entry) -> Option<Event> {
    crate::ledger_event(event_type, SOURCE, entry)
        .inspect_err(|error| tracing::warn!(%error, "a ledger event could not be built"))
        .ok()
}

/// The queue's sending end, and the archiver beside it.
#[derive(Clone)]
pub struct Ledger {
    tx: mpsc::Sender<Announcement>,
    /// `--ledger-sink`, where set.
    cluster_sink: Option<Arc<str>>,
    pub metrics: LedgerMetrics,
    pub archiver: archive::Archiver,
}

impl Ledger {
    /// Starts the delivery task (`ledger-delivery`) over a queue of `capacity` announcements.
    pub fn spawn(
        sender: Arc<Sender>,
        cluster_sink: Option<Arc<str>>,
        capacity: usize,
        delivery: Delivery,
        metrics: LedgerMetrics,
    ) -> (Self, Supervised) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let archiver = archive::Archiver::new(sender.clone());
        let task = deliver_all(rx, sender, delivery, metrics.clone());
        let ledger = Self {
            tx,
            cluster_sink,
            metrics,
            archiver,
        };
        (ledger, supervise::spawn("ledger-delivery", task))
    }

    /// Announces `entry` as `event_type` to `policy_sink` (unless `archived` there already) and
    /// to the cluster's sink.
    pub fn announce(
        &self,
        event_type: &str,
        entry: &Entry,
        policy_sink: Option<&Arc<str>>,
        archived: bool,
    ) {
        let policy = policy_sink
            .filter(|_| !archived)
            .map(|sink| (sink.clone(), Destination::Policy));
        let cluster = self
            .cluster_sink
            .clone()
            .map(|sink| (sink, Destination::Cluster));
        let mut destinations = policy.into_iter().chain(cluster).peekable();
        if destinations.peek().is_none() {
            return;
        }
        let Some(event) = event(event_type, entry) else {
            return;
        };
        for (sink, destination) in destinations {
            let announcement = Announcement {
                sink,
                destination,
                event: event.clone(),
            };
            if self.tx.try_send(announcement).is_err() {
                self.metrics
                    .dropped
                    .get_or_create(&destination.label())
                    .inc();
                tracing::warn!(uid = %entry.uid, ?destination, "ledger queue full: announcement dropped");
            }
        }
    }
}

async fn deliver_all(
    mut rx: mpsc::Receiver<Announcement>,
    sender: Arc<Sender>,
    delivery: Delivery,
    metrics: LedgerMetrics,
) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(announcement) = rx.recv().await {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (sender, delivery, metrics) = (sender.clone(), delivery.clone(), metrics.clone());
        tokio::spawn(async move {
            let label = announcement.destination.label();
            let sink = announcement.sink;
            match sender.deliver(&sink, announcement.event, &delivery).await {
                Ok(()) => {
                    metrics.delivered.get_or_create(&label).inc();
                }
                Err(undelivered) => {
                    metrics.undelivered.get_or_create(&label).inc();
                    let note = undelivered.note(&sink);
                    match undelivered {
                        Undelivered::Refused(_) => tracing::warn!(%note, "ledger event refused"),
                        _ => tracing::warn!(%note, "ledger event undelivered"),
                    }
                }
            }
            drop(permit);
        });
    }
}
