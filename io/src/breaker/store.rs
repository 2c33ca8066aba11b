//! The breaker's state outside the process: a ConfigMap `<lease name>-circuit-breaker` in the
//! controller's namespace exists while the breaker is open. The leader writes it when its breaker
//! opens (and records a Warning Event on it); every replica watches it, so a restarted controller
//! or a new leader opens its breaker before its first DELETE; deleting it releases the breaker.
//! A ConfigMap rather than an annotation on the Lease: a write to the Lease by anyone but the
//! leader would make the leader's next renewal conflict, and the admin's release would cost a
//! leadership change.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Api, Client, Resource};
use tokio::sync::watch;

use super::metrics::BreakerMetrics;
use super::{Breaker, Position, Trip};
use crate::watch_backoff::watch_backoff;

use kube_retention_common::breaker::{LIMIT, MESSAGE, TRIPPED_AT, WINDOW};

/// How often a trip that could not be written is written again.
const RETRY: Duration = Duration::from_secs(5);

pub use kube_retention_common::breaker::configmap_name as name_for;

pub struct Store {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    pub breaker: Breaker,
    pub leadership: watch::Receiver<bool>,
    pub recorder: Recorder,
    pub metrics: BreakerMetrics,
}

/// The ConfigMap recording `trip`.
pub fn config_map(name: &str, trip: &Trip) -> ConfigMap {
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
    }
}

impl Store {
    /// Keeps the breaker and the ConfigMap in step until the process ends.
    pub async fn run(mut self, limit: u32, window: Duration) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut stored = watcher::watcher(api.clone(), config)
            .backoff(watch_backoff())
            .boxed();
        let mut position = self.breaker.subscribe();
        let clock = self.breaker.clock();
        let fallback = || Trip {
            at: clock.now(),
            limit,
            window,
        };
        // Whether the ConfigMap exists as last seen, and, during a list, whether it was listed.
        let mut exists = false;
        let mut listed = false;
        let mut retry = tokio::time::interval(RETRY);
        loop {
            tokio::select! {
                event = stored.next() => match event {
                    Some(Ok(WatchEvent::Init)) => listed = false,
                    Some(Ok(WatchEvent::InitApply(config_map) | WatchEvent::Apply(config_map))) => {
                        listed = true;
                        exists = true;
                        if !matches!(self.breaker.position(), Position::Open(_)) {
                            let trip = trip_of(&config_map, &fallback());
                            tracing::warn!(at = %trip.at, "the circuit breaker is open (its ConfigMap says so): no deletion is sent until it is released");
                            self.breaker.open(trip);
                        }
                    }
                    Some(Ok(WatchEvent::InitDone)) => {
                        exists = listed;
                        if !exists {
                            self.release();
                        }
                    }
                    Some(Ok(WatchEvent::Delete(_))) => {
                        exists = false;
                        self.release();
                    }
                    Some(Err(error)) => tracing::warn!(%error, name = %self.name, "watching the circuit breaker's ConfigMap"),
                    None => return,
                },
                changed = position.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let opened = position.borrow_and_update().clone();
                    if let Position::Open(trip) = opened && !exists {
                        // Opened here, not read from the ConfigMap: a trip of this replica's.
                        self.metrics.trips.inc();
                        exists = self.write(&api, &trip).await;
                    }
                }
                _ = retry.tick() => {
                    if let Position::Open(trip) = self.breaker.position() && !exists {
                        exists = self.write(&api, &trip).await;
                    }
                }
            }
            self.update_gauges();
        }
    }

    fn update_gauges(&self) {
        let open = matches!(self.breaker.position(), Position::Open(_));
        self.metrics.open.set(i64::from(open));
        let waiting = i64::try_from(self.breaker.waiting()).unwrap_or(i64::MAX);
        self.metrics.held.set(waiting);
    }

    /// The ConfigMap is gone (or never was): the breaker closes, a release if it was open.
    fn release(&self) {
        if matches!(self.breaker.position(), Position::Open(_)) {
            tracing::info!(
                held = self.breaker.waiting(),
                "the circuit breaker was released: deletions resume, those it held first"
            );
        }
        self.breaker.close();
    }

    /// Writes `trip` as the leader; answers whether the ConfigMap now exists.
    async fn write(&mut self, api: &Api<ConfigMap>, trip: &Trip) -> bool {
        if !*self.leadership.borrow_and_update() {
            return false;
        }
        let created = match api
            .create(&PostParams::default(), &config_map(&self.name, trip))
            .await
        {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.code == 409 => return true,
            Err(error) => {
                tracing::warn!(%error, name = %self.name, "writing the circuit breaker's ConfigMap; retrying");
                return false;
            }
        };
        let reference = ObjectReference {
            api_version: Some(ConfigMap::api_version(&()).into_owned()),
            kind: Some(ConfigMap::kind(&()).into_owned()),
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            uid: created.metadata.uid,
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "CircuitBreakerOpen".into(),
            note: Some(trip.message()),
            action: "PauseDeletions".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "could not record the circuit breaker's Event");
        }
        true
    }
}
