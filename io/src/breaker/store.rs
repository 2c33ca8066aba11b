//! The breakers' state outside the process, two ConfigMaps in the controller's namespace
//! ([`kube_retention_common::breaker`] names them and their keys):
//!
//! - `<lease name>-circuit-breaker` exists while the cluster's breaker is open;
//! - `<lease name>-circuit-breaker-namespaces` has a key per namespace whose breaker is open.
//!
//! The leader writes a trip when a breaker opens (creating the first, adding a key to the
//! second with a merge patch, which never conflicts with an admin's removal of another key) and
//! records a Warning Event on the ConfigMap; every replica watches both, so a restarted
//! controller or a new leader opens its breakers before its first DELETE (none goes until both
//! are read); deleting the first, or a key of the second, releases that breaker, and deleting
//! the second releases every namespace's. A ConfigMap rather than an annotation on the Lease: a
//! write to the Lease by anyone but the leader would make the leader's next renewal conflict,
//! and the admin's release would cost a leadership change. One ConfigMap for the namespaces,
//! not one each, so the controller reads and writes only objects it names (its RBAC names
//! them); it holds at most [`MAX_OPEN_NAMESPACES`] keys.
//!
//! A breaker opened here and not written yet is never released by a list that does not show
//! it: only a trip that was seen stored and then is gone counts as a release.
//!
//! [`MAX_OPEN_NAMESPACES`]: kube_retention_common::breaker::MAX_OPEN_NAMESPACES

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Api, Client, Resource};
use serde_json::json;
use tokio::sync::watch;

use super::metrics::{BreakerMetrics, ScopeLabels};
use super::{Breaker, Cause, Limit, Position, Trip};
use crate::watch_backoff::watch_backoff;

use kube_retention_common::breaker::{
    CAUSE, CAUSE_NAMESPACES, LIMIT, MESSAGE, NamespaceTrip, TRIPPED_AT, WINDOW,
};

/// How often a trip that could not be written is written again.
const RETRY: Duration = Duration::from_secs(5);

pub use kube_retention_common::breaker::configmap_name as name_for;
pub use kube_retention_common::breaker::namespaces_configmap_name as namespaces_name_for;

pub struct Store {
    pub client: Client,
    pub namespace: String,
    /// The cluster breaker's ConfigMap.
    pub name: String,
    /// The namespaces' breakers' ConfigMap.
    pub namespaces_name: String,
    pub breaker: Breaker,
    pub leadership: watch::Receiver<bool>,
    pub recorder: Recorder,
    pub metrics: BreakerMetrics,
}

/// The ConfigMap recording the cluster's `trip`.
pub fn config_map(name: &str, trip: &Trip) -> ConfigMap {
    let cause = (trip.cause == Cause::NamespacesOpen).then_some((CAUSE, CAUSE_NAMESPACES.into()));
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                (TRIPPED_AT, trip.at.to_string()),
                (LIMIT, trip.limit.to_string()),
                (WINDOW, humantime::format_duration(trip.window).to_string()),
                (MESSAGE, trip.message()),
            ]
            .into_iter()
            .chain(cause)
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// The trip a ConfigMap records; what it does not say (written by hand) is `fallback`'s.
pub fn trip_of(config_map: &ConfigMap, fallback: &Trip) -> Trip {
    let data = config_map.data.clone().unwrap_or_default();
    let read = |key: &str| data.get(key).map(|value| value.trim().to_owned());
    Trip {
        at: read(TRIPPED_AT)
            .and_then(|at| at.parse().ok())
            .unwrap_or(fallback.at),
        limit: read(LIMIT)
            .and_then(|limit| limit.parse().ok())
            .unwrap_or(fallback.limit),
        window: read(WINDOW)
            .and_then(|window| humantime::parse_duration(&window).ok())
            .unwrap_or(fallback.window),
        cause: match read(CAUSE).as_deref() {
            Some(CAUSE_NAMESPACES) => Cause::NamespacesOpen,
            _ => fallback.cause,
        },
    }
}

/// A namespace's `trip` as its key's value.
pub fn namespace_value(trip: &Trip) -> String {
    NamespaceTrip {
        tripped_at: trip.at.to_string(),
        limit: trip.limit,
        window: humantime::format_duration(trip.window).to_string(),
    }
    .encode()
}

/// The namespaces' trips a ConfigMap records; what a value does not say (written by hand) is
/// `fallback`'s.
pub fn namespace_trips(config_map: &ConfigMap, fallback: &Trip) -> BTreeMap<String, Trip> {
    let data = config_map.data.clone().unwrap_or_default();
    data.into_iter()
        .map(|(namespace, value)| {
            let stored = NamespaceTrip::decode(&value);
            let trip = Trip {
                at: stored
                    .as_ref()
                    .and_then(|stored| stored.tripped_at.parse().ok())
                    .unwrap_or(fallback.at),
                limit: stored
                    .as_ref()
                    .map_or(fallback.limit, |stored| stored.limit),
                window: stored
                    .and_then(|stored| humantime::parse_duration(&stored.window).ok())
                    .unwrap_or(fallback.window),
                cause: fallback.cause,
            };
            (namespace, trip)
        })
        .collect()
}

/// What the store has seen of one ConfigMap's watch.
#[derive(Debug, Default)]
struct Seen {
    /// Its first list has ended.
    known: bool,
    /// It existed as last seen.
    exists: bool,
    /// During a list: what was listed.
    listed: Option<ConfigMap>,
}

/// What the store knows beyond the breakers themselves.
#[derive(Debug, Default)]
struct Known {
    cluster: Seen,
    namespaces: Seen,
    /// The cluster's ConfigMap was seen and is gone: a release, applied once the namespaces'
    /// are known too.
    cluster_released: bool,
    /// The namespaces the ConfigMap named as last seen.
    stored: BTreeMap<String, Trip>,
    /// Trips opened here and not seen stored yet, counted once each as this replica's.
    counted: BTreeSet<Arc<str>>,
    cluster_counted: bool,
    /// Trips written and not seen stored yet: not written again before the next retry.
    written: BTreeSet<Arc<str>>,
    cluster_written: bool,
}

/// Which ConfigMap an event is of.
enum Of {
    Cluster,
    Namespaces,
}

type Watch = BoxStream<'static, watcher::Result<WatchEvent<ConfigMap>>>;

fn watch_named(api: &Api<ConfigMap>, name: &str) -> Watch {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher::watcher(api.clone(), config)
        .backoff(watch_backoff())
        .boxed()
}

impl Store {
    /// Keeps the breakers and the ConfigMaps in step until the process ends; `cluster` and
    /// `per_namespace` stand in for what a ConfigMap written by hand does not say.
    pub async fn run(mut self, cluster: Limit, per_namespace: Limit) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut cluster_watch = watch_named(&api, &self.name);
        let mut namespaces_watch = watch_named(&api, &self.namespaces_name);
        let mut changes = self.breaker.subscribe();
        let clock = self.breaker.clock();
        let fallback =
            |limit: Limit| Trip::of_deletions(clock.now(), limit.deletions, limit.window);
        let mut known = Known::default();
        let mut retry = tokio::time::interval(RETRY);
        loop {
            let (of, event) = tokio::select! {
                event = cluster_watch.next() => (Of::Cluster, event),
                event = namespaces_watch.next() => (Of::Namespaces, event),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.write(&api, &mut known).await;
                    self.update_gauges();
                    continue;
                }
                _ = retry.tick() => {
                    known.written.clear();
                    known.cluster_written = false;
                    self.write(&api, &mut known).await;
                    self.update_gauges();
                    continue;
                }
            };
            let Some(event) = event else { return };
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, "watching a circuit breaker's ConfigMap");
                    continue;
                }
            };
            match of {
                Of::Cluster => self.on_cluster(event, &mut known, &fallback(cluster)),
                Of::Namespaces => {
                    let fallback = fallback(per_namespace);
                    if let Some(now) = on_namespaces(event, &mut known.namespaces, &fallback) {
                        self.apply_namespaces(now, &mut known);
                    }
                }
            }
            self.settle(&mut known);
            self.update_gauges();
        }
    }

    /// Once both ConfigMaps are known: the cluster's breaker closes where it was not known yet
    /// (it is not open: its ConfigMap would have opened it), or was released.
    fn settle(&self, known: &mut Known) {
        if !known.cluster.known || !known.namespaces.known {
            return;
        }
        if std::mem::take(&mut known.cluster_released) {
            tracing::info!(
                held = self.breaker.waiting(),
                "the circuit breaker was released: deletions resume, those it held first"
            );
            self.breaker.close();
        } else if self.breaker.position() == Position::Unknown {
            self.breaker.close();
        }
    }

    /// A cluster ConfigMap event: opens the cluster's breaker, or notes its release.
    fn on_cluster(&self, event: WatchEvent<ConfigMap>, known: &mut Known, fallback: &Trip) {
        let seen = &mut known.cluster;
        let gone = match event {
            WatchEvent::Init => {
                seen.listed = None;
                return;
            }
            WatchEvent::InitApply(config_map) | WatchEvent::Apply(config_map) => {
                seen.exists = true;
                known.cluster_released = false;
                known.cluster_counted = false;
                if !matches!(self.breaker.position(), Position::Open(_)) {
                    let trip = trip_of(&config_map, fallback);
                    tracing::warn!(at = %trip.at, "the circuit breaker is open (its ConfigMap says so): no deletion is sent until it is released");
                    self.breaker.open(trip);
                }
                seen.listed = Some(config_map);
                return;
            }
            WatchEvent::InitDone => {
                seen.known = true;
                seen.listed.take().is_none()
            }
            WatchEvent::Delete(_) => true,
        };
        if gone && std::mem::replace(&mut seen.exists, false) {
            known.cluster_released = true;
        }
    }

    /// The ConfigMap names `now`: namespaces new to it open, those it named before and no more
    /// are released.
    fn apply_namespaces(&self, now: BTreeMap<String, Trip>, known: &mut Known) {
        let released = known
            .stored
            .keys()
            .filter(|namespace| !now.contains_key(*namespace));
        for namespace in released {
            tracing::info!(%namespace, "the circuit breaker of a namespace was released: its deletions resume, those it held first");
            self.breaker.close_namespace(namespace);
        }
        for (namespace, trip) in &now {
            known.counted.remove(namespace.as_str());
            known.written.remove(namespace.as_str());
            let open = self.breaker.namespace_position(namespace);
            if !matches!(open, Position::Open(_)) {
                tracing::warn!(%namespace, at = %trip.at, "the circuit breaker of a namespace is open (its ConfigMap says so): none of its deletions is sent until it is released");
                self.breaker.open_namespace(namespace, *trip);
            }
        }
        known.stored = now;
    }

    fn update_gauges(&self) {
        let open = matches!(self.breaker.position(), Position::Open(_));
        self.metrics.open.set(i64::from(open));
        let namespaces = i64::try_from(self.breaker.open_namespaces()).unwrap_or(i64::MAX);
        self.metrics.open_namespaces.set(namespaces);
        let waiting = i64::try_from(self.breaker.waiting()).unwrap_or(i64::MAX);
        self.metrics.held.set(waiting);
    }

    /// Writes what opened here and is not stored, as the leader; counts each such trip once.
    async fn write(&mut self, api: &Api<ConfigMap>, known: &mut Known) {
        self.write_cluster(api, known).await;
        self.write_namespaces(api, known).await;
    }

    /// Creates the cluster's ConfigMap where its breaker opened here.
    async fn write_cluster(&mut self, api: &Api<ConfigMap>, known: &mut Known) {
        let Position::Open(trip) = self.breaker.position() else {
            known.cluster_counted = false;
            return;
        };
        if known.cluster.exists || !known.cluster.known {
            return;
        }
        if !std::mem::replace(&mut known.cluster_counted, true) {
            self.metrics
                .trips
                .get_or_create(&ScopeLabels::CLUSTER)
                .inc();
        }
        if known.cluster_written || !*self.leadership.borrow_and_update() {
            return;
        }
        let name = self.name.clone();
        let created = match api
            .create(&PostParams::default(), &config_map(&name, &trip))
            .await
        {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // Another replica's, or ours not seen yet: its watch event says so soon.
                known.cluster_written = true;
                return;
            }
            Err(error) => {
                tracing::warn!(%error, %name, "writing the circuit breaker's ConfigMap; retrying");
                return;
            }
        };
        known.cluster_written = true;
        self.record(&created, trip.message()).await;
    }

    /// Adds the namespaces whose breakers opened here to their ConfigMap: one merge patch
    /// (creating it where it is not there), one Warning Event each.
    async fn write_namespaces(&mut self, api: &Api<ConfigMap>, known: &mut Known) {
        let opened: Vec<(Arc<str>, Trip)> = self
            .breaker
            .namespace_trips()
            .into_iter()
            .filter(|(namespace, _)| !known.stored.contains_key(namespace.as_ref()))
            .collect();
        known
            .counted
            .retain(|namespace| opened.iter().any(|(open, _)| open == namespace));
        for (namespace, _) in &opened {
            if known.counted.insert(namespace.clone()) {
                let trips = self.metrics.trips.get_or_create(&ScopeLabels::NAMESPACE);
                trips.inc();
            }
        }
        let pending: Vec<&(Arc<str>, Trip)> = opened
            .iter()
            .filter(|(namespace, _)| !known.written.contains(namespace))
            .collect();
        if pending.is_empty() || !known.namespaces.known || !*self.leadership.borrow_and_update() {
            return;
        }
        let data: BTreeMap<String, String> = pending
            .iter()
            .map(|(namespace, trip)| (namespace.to_string(), namespace_value(trip)))
            .collect();
        let name = self.namespaces_name.clone();
        let patch = json!({ "data": data });
        let written = match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let config_map = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &config_map).await
            }
            written => written,
        };
        let written = match written {
            Ok(written) => written,
            Err(error) => {
                tracing::warn!(%error, %name, "writing the namespaces' circuit breakers' ConfigMap; retrying");
                return;
            }
        };
        for (namespace, trip) in pending {
            known.written.insert(namespace.clone());
            self.record(&written, trip.message_in(namespace)).await;
        }
    }

    /// The Warning Event of a trip, on the ConfigMap that records it.
    async fn record(&self, config_map: &ConfigMap, note: String) {
        let reference = ObjectReference {
            api_version: Some(ConfigMap::api_version(&()).into_owned()),
            kind: Some(ConfigMap::kind(&()).into_owned()),
            name: config_map.metadata.name.clone(),
            namespace: Some(self.namespace.clone()),
            uid: config_map.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "CircuitBreakerOpen".into(),
            note: Some(note),
            action: "PauseDeletions".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "could not record the circuit breaker's Event");
        }
    }
}

/// A namespaces' ConfigMap event: the trips it names now, where that is known.
fn on_namespaces(
    event: WatchEvent<ConfigMap>,
    seen: &mut Seen,
    fallback: &Trip,
) -> Option<BTreeMap<String, Trip>> {
    match event {
        WatchEvent::Init => {
            seen.listed = None;
            None
        }
        WatchEvent::InitApply(config_map) => {
            seen.listed = Some(config_map);
            None
        }
        WatchEvent::InitDone => {
            seen.known = true;
            let listed = seen.listed.take();
            seen.exists = listed.is_some();
            Some(listed.map_or_else(BTreeMap::new, |listed| namespace_trips(&listed, fallback)))
        }
        WatchEvent::Apply(config_map) => {
            seen.exists = true;
            Some(namespace_trips(&config_map, fallback))
        }
        WatchEvent::Delete(_) => {
            seen.exists = false;
            Some(BTreeMap::new())
        }
    }
}
