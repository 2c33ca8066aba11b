//! The deletion ledger: each deletion (and each notice) announced as a CloudEvent to the
//! governing policy's `spec.sink` and to the controller's `--ledger-sink`, at least once; and
//! the way every CloudEvent the controller sends goes out, a Cleaner's too ([`Ledger::send`]).
//!
//! Announcements wait in lanes ([`lanes`]): a queue per namespace and sink, served round robin,
//! a failing sink backing off without holding a slot, the attempts under way bounded in all, per
//! namespace and per sink. Tenants' sinks — policies' and Cleaners' — share one set of lanes
//! ([`tenant_limits`]); the admin's `--ledger-sink` has its own ([`cluster_limits`]), its own
//! queue, slots and task ([`lane`]), so no tenant's sink can delay or drop the admin's ledger.
//! Each set holds at most `--ledger-queue` announcements; past it the oldest of the longest
//! queue is dropped and counted, so a tenant that floods, or whose sink is down, loses its own
//! announcements, not the others'. Each item is tried up to [`Delivery`]'s attempts; the event's
//! id is the object's uid and the event's type, so a consumer can drop a repeat. A ledger that
//! cannot keep up never slows a deletion. Where a deletion must not go unannounced, the policy
//! sets `archiveBeforeDelete`: the executor then delivers before the DELETE and deletes only on a
//! 2xx ([`archive`]), so nothing is dropped because nothing is deleted first.

use std::sync::Arc;

use cloudevents::Event;
use kube_retention_common::ledger::Entry;
use kube_retention_runtime::supervise::Supervised;

use crate::{Delivery, Sender};

pub mod archive;
pub mod lane;
pub mod lanes;
pub mod metrics;

pub use lane::Lane;
pub use lanes::{Done, Item, Lanes, Limits};
pub use metrics::{LedgerMetrics, SinkLabels};

/// Tenants' attempts under way at once, all their sinks together.
pub const TENANT_IN_FLIGHT: usize = 32;
/// One namespace's attempts under way at once: a tenant whose sinks hang holds no more slots.
pub const NAMESPACE_IN_FLIGHT: usize = 2;
/// Attempts under way at once to one sink (a ClusterRetentionPolicy's is every namespace's).
pub const SINK_IN_FLIGHT: usize = 4;
/// The admin's `--ledger-sink`'s attempts under way at once.
pub const CLUSTER_IN_FLIGHT: usize = 8;

/// The tenants' lanes: `queued` items at most, [`TENANT_IN_FLIGHT`] attempts,
/// [`NAMESPACE_IN_FLIGHT`] per namespace and [`SINK_IN_FLIGHT`] per sink.
pub fn tenant_limits(queued: usize, delivery: Delivery) -> Limits {
    Limits {
        queued,
        in_flight: TENANT_IN_FLIGHT,
        per_namespace: NAMESPACE_IN_FLIGHT,
        per_sink: SINK_IN_FLIGHT,
        delivery,
    }
}

/// The admin's lanes: `queued` items at most, [`CLUSTER_IN_FLIGHT`] attempts to its one sink,
/// its queue fair between the deleted objects' namespaces too (a flood of one namespace's
/// deletions drops that namespace's announcements first).
pub fn cluster_limits(queued: usize, delivery: Delivery) -> Limits {
    Limits {
        queued,
        in_flight: CLUSTER_IN_FLIGHT,
        per_namespace: CLUSTER_IN_FLIGHT,
        per_sink: CLUSTER_IN_FLIGHT,
        delivery,
    }
}

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

/// The event of `event_type` carrying `entry` ([`crate::ledger_event`]); `None`
/// (logged) if it cannot be built.
pub fn event(event_type: &str, entry: &Entry) -> Option<Event> {
    crate::ledger_event(event_type, SOURCE, entry)
        .inspect_err(|error| tracing::warn!(%error, "a ledger event could not be built"))
        .ok()
}

/// The lanes' sending ends, and the archiver beside them.
#[derive(Clone)]
pub struct Ledger {
    tenants: Lane,
    /// `--ledger-sink` and its own lanes, where set.
    cluster: Option<(Arc<str>, Lane)>,
    pub metrics: LedgerMetrics,
    pub archiver: archive::Archiver,
}

impl Ledger {
    /// Starts the tenants' delivery task (`ledger-delivery`), and the admin's
    /// (`ledger-cluster-delivery`) where `cluster_sink` is set, each over lanes of at most
    /// `capacity` announcements, delivering as `delivery` says.
    pub fn spawn(
        sender: Arc<Sender>,
        cluster_sink: Option<Arc<str>>,
        capacity: usize,
        delivery: Delivery,
        metrics: LedgerMetrics,
    ) -> (Self, Vec<Supervised>) {
        let archiver = archive::Archiver::new(sender.clone());
        let limits = tenant_limits(capacity, delivery.clone());
        let (tenants, delivering) =
            Lane::spawn("ledger-delivery", sender.clone(), limits, metrics.clone());
        let mut tasks = vec![delivering];
        let cluster = cluster_sink.map(|sink| {
            let limits = cluster_limits(capacity, delivery);
            let (lane, delivering) =
                Lane::spawn("ledger-cluster-delivery", sender, limits, metrics.clone());
            tasks.push(delivering);
            (sink, lane)
        });
        let ledger = Self {
            tenants,
            cluster,
            metrics,
            archiver,
        };
        (ledger, tasks)
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
        let policy_sink = policy_sink.filter(|_| !archived);
        if policy_sink.is_none() && self.cluster.is_none() {
            return;
        }
        let Some(event) = event(event_type, entry) else {
            return;
        };
        let namespace: Arc<str> = Arc::from(entry.namespace.as_str());
        let item = |sink: &Arc<str>, destination: Destination| Item {
            namespace: namespace.clone(),
            sink: sink.clone(),
            label: Some(destination.label()),
            event: event.clone(),
            attempts: 0,
            done: None,
        };
        if let Some(sink) = policy_sink {
            self.tenants.push(item(sink, Destination::Policy));
        }
        if let Some((sink, lane)) = &self.cluster {
            lane.push(item(sink, Destination::Cluster));
        }
    }

    /// Sends `event` to a tenant's `sink` as work of `namespace` (a Cleaner's announcement),
    /// telling `done` how it ended.
    pub fn send(&self, namespace: &str, sink: &str, event: Event, done: Done) {
        self.tenants.push(Item {
            namespace: Arc::from(namespace),
            sink: Arc::from(sink),
            label: None,
            event,
            attempts: 0,
            done: Some(done),
        });
    }

    /// The tenants' lanes: items waiting and attempts under way.
    pub fn tenants_load(&self) -> (usize, usize) {
        self.tenants.load()
    }
}
