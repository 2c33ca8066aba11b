//! The admission port's connections, bounded. At most `--max-connections` are open at once,
//! TLS handshakes included: the server accepts only when one of them is free, so a flood
//! waits in the kernel's accept queue, not in the webhook's memory or file descriptors. At
//! most `--max-connections-per-peer` come from one address, so one pod cannot hold them all; a
//! connection past that is closed as soon as it is accepted. A connection with no request in
//! flight for `--idle-connection-timeout` is closed, HTTP/1 and HTTP/2 alike (hyper closes
//! neither by itself: its HTTP/1 header timeout covers one request's wait, and HTTP/2 has no
//! idle timeout at all); the API server opens another when it next calls. When all are taken,
//! the connection idle longest is asked to close at once, so an idle connection never keeps
//! the API server's new one waiting; where none is idle, the connection whose oldest request
//! began first is dropped, so connections held by bodies that trickle in cannot keep it
//! waiting either.
//!
//! Hand-written: tokio's semaphore bounds the count, but what a connection is doing (whether
//! it is idle, and since when) is the server's own to know.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::metrics::Metrics;

/// The default bound on connections open at once: far above the API servers' (one or a few
/// HTTP/2 connections each, 64 streams apiece), and what their buffers cost (about 100 KiB
/// each at most: TLS records, HTTP/1 headers, HTTP/2 windows) within the chart's memory limit
/// beside the admissions' own budget.
pub const DEFAULT_MAX: usize = 256;
/// The default bound on one address's connections: a quarter of all.
pub const DEFAULT_MAX_PER_PEER: usize = 64;
/// The default time a connection may stay without a request.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection is left alone after it was accepted or began a request before it may
/// be closed to make room: time for a handshake, a request and its answer.
pub const SETTLING: Duration = Duration::from_secs(1);

/// The connections' bounds.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max: usize,
    pub max_per_peer: usize,
    pub idle_timeout: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX,
            max_per_peer: DEFAULT_MAX_PER_PEER,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Every connection open, shared by the accept loop and the connections.
pub struct Connections {
    bounds: Bounds,
    slots: Arc<Semaphore>,
    state: Mutex<State>,
    metrics: Metrics,
}

#[derive(Default)]
struct State {
    next: u64,
    by_peer: HashMap<IpAddr, usize>,
    open: BTreeMap<u64, Arc<Activity>>,
}

/// What one connection is doing: its requests in flight and since when each, since when it
/// has had none, and the signals that ask it to close (gracefully, once idle) or to drop
/// (at once, its requests with it).
pub struct Activity {
    state: Mutex<Requests>,
    close: Notify,
    drop: Notify,
}

struct Requests {
    next: u64,
    /// When each request in flight began.
    in_flight: BTreeMap<u64, Instant>,
    idle_since: Instant,
}

impl Activity {
    fn new() -> Self {
        Self {
            state: Mutex::new(Requests {
                next: 0,
                in_flight: BTreeMap::new(),
                idle_since: Instant::now(),
            }),
            close: Notify::new(),
            drop: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Requests> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Since when the connection has had no request; `None` while one is in flight.
    pub fn idle(&self) -> Option<Instant> {
        let state = self.lock();
        state.in_flight.is_empty().then_some(state.idle_since)
    }

    /// When its oldest request in flight began; `None` while it has none.
    fn oldest_request(&self) -> Option<Instant> {
        self.lock().in_flight.values().min().copied()
    }

    /// A request begins; it ends when the guard is dropped.
    pub fn request(self: &Arc<Self>) -> InRequest {
        let mut state = self.lock();
        let id = state.next;
        state.next += 1;
        state.in_flight.insert(id, Instant::now());
        InRequest {
            activity: self.clone(),
            id,
        }
    }

    /// Resolves when the connection is asked to close once its requests are answered.
    pub async fn asked_to_close(&self) {
        self.close.notified().await;
    }

    /// Resolves when the connection is asked to drop at once, its requests unanswered.
    pub async fn asked_to_drop(&self) {
        self.drop.notified().await;
    }
}

/// A request in flight on a connection.
pub struct InRequest {
    activity: Arc<Activity>,
    id: u64,
}

impl Drop for InRequest {
    fn drop(&mut self) {
        let mut state = self.activity.lock();
        state.in_flight.remove(&self.id);
        if state.in_flight.is_empty() {
            state.idle_since = Instant::now();
        }
    }
}

/// A free place for one connection, taken before accepting it.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Connections {
    pub fn new(bounds: Bounds, metrics: Metrics) -> Self {
        Self {
            bounds,
            slots: Arc::new(Semaphore::new(bounds.max)),
            state: Mutex::new(State::default()),
            metrics,
        }
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free place; when none is, a connection is asked to make room (`make_room`)
    /// and this waits for one to close.
    pub async fn slot(&self) -> Slot {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Slot { _permit: permit };
        }
        self.make_room();
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        Slot { _permit: permit }
    }

    /// Asks the connection idle longest to close; where none is idle, drops the one whose
    /// oldest request began first. The API server's requests are answered in milliseconds, so
    /// the connections that hold their requests longest are the ones whose bodies trickle in
    /// (their requests end at the admission's deadline anyway). Neither for less than
    /// [`SETTLING`]: a connection just accepted is in its handshake, or about to send its
    /// request, and may be the API server's; until one has settled, the next waits.
    fn make_room(&self) {
        let state = self.lock();
        let settled = Instant::now() - SETTLING;
        let idlest = state
            .open
            .values()
            .filter_map(|activity| Some((activity.idle()?, activity)))
            .filter(|(since, _)| *since <= settled)
            .min_by_key(|(since, _)| *since);
        if let Some((_, activity)) = idlest {
            activity.close.notify_one();
            return;
        }
        let slowest = state
            .open
            .values()
            .filter_map(|activity| Some((activity.oldest_request()?, activity)))
            .filter(|(since, _)| *since <= settled)
            .min_by_key(|(since, _)| *since);
        if let Some((_, activity)) = slowest {
            activity.drop.notify_one();
        }
    }

    /// The connection accepted from `peer` in `slot`; `None` (counted) when `peer` has its
    /// bound of connections open already.
    pub fn open(self: &Arc<Self>, slot: Slot, peer: IpAddr) -> Option<Connection> {
        let mut state = self.lock();
        let count = state.by_peer.entry(peer).or_insert(0);
        if *count >= self.bounds.max_per_peer {
            drop(state);
            self.metrics.connection_refused("peer");
            return None;
        }
        *count += 1;
        let id = state.next;
        state.next += 1;
        let activity = Arc::new(Activity::new());
        state.open.insert(id, activity.clone());
        self.metrics.connections_open.inc();
        Some(Connection {
            connections: self.clone(),
            id,
            peer,
            activity,
            _slot: slot,
        })
    }

    /// The connections open now.
    pub fn open_now(&self) -> usize {
        self.lock().open.len()
    }

    /// Resolves once every connection has closed.
    pub async fn all_closed(&self) {
        let all = u32::try_from(self.bounds.max).unwrap_or(u32::MAX);
        let _every = self.slots.acquire_many(all).await;
    }
}

/// One open connection, its place given back when dropped.
pub struct Connection {
    connections: Arc<Connections>,
    id: u64,
    peer: IpAddr,
    pub activity: Arc<Activity>,
    _slot: Slot,
}

impl Connection {
    /// When this connection, idle now, reaches its idle timeout; `None` while a request is in
    /// flight.
    pub fn idle_deadline(&self) -> Option<Instant> {
        Some(self.activity.idle()? + self.connections.bounds.idle_timeout)
    }

    /// How long to wait before looking again whether the connection is idle past its timeout.
    pub fn idle_timeout(&self) -> Duration {
        self.connections.bounds.idle_timeout
    }

    /// Counts this connection as closed for being idle.
    pub fn closed_idle(&self) {
        self.connections.metrics.connections_idle_closed.inc();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut state = self.connections.lock();
        state.open.remove(&self.id);
        if let Some(count) = state.by_peer.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                state.by_peer.remove(&self.peer);
            }
        }
        self.connections.metrics.connections_open.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connections(max: usize, max_per_peer: usize) -> Arc<Connections> {
        let bounds = Bounds {
            max,
            max_per_peer,
            idle_timeout: Duration::from_secs(30),
        };
        Arc::new(Connections::new(bounds, Metrics::default()))
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    #[tokio::test(start_paused = true)]
    async fn one_peer_gets_its_bound_and_no_more() {
        let connections = connections(10, 2);
        let mut open = Vec::new();
        for _ in 0..2 {
            open.push(connections.open(connections.slot().await, PEER).unwrap());
        }
        assert!(connections.open(connections.slot().await, PEER).is_none());
        assert!(connections.open(connections.slot().await, OTHER).is_some());
        open.pop();
        assert!(connections.open(connections.slot().await, PEER).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn when_all_are_taken_the_idlest_is_asked_to_close() {
        let connections = connections(2, 2);
        let first = connections.open(connections.slot().await, PEER).unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = connections.open(connections.slot().await, PEER).unwrap();
        let _busy = second.activity.request();
        tokio::time::advance(SETTLING).await;
        let waiting = tokio::spawn({
            let connections = connections.clone();
            async move { connections.slot().await }
        });
        first.activity.asked_to_close().await;
        assert!(!waiting.is_finished());
        drop(first);
        let slot = waiting.await.unwrap();
        assert!(connections.open(slot, OTHER).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn when_none_is_idle_the_one_holding_its_request_longest_is_dropped() {
        let connections = connections(2, 2);
        let trickling = connections.open(connections.slot().await, PEER).unwrap();
        let _held = trickling.activity.request();
        tokio::time::advance(Duration::from_secs(1)).await;
        let busy = connections.open(connections.slot().await, OTHER).unwrap();
        let _answered_soon = busy.activity.request();
        tokio::time::advance(Duration::from_millis(10)).await;
        let waiting = tokio::spawn({
            let connections = connections.clone();
            async move { connections.slot().await }
        });
        trickling.activity.asked_to_drop().await;
        drop(trickling);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_just_accepted_is_left_to_settle() {
        let connections = connections(1, 1);
        let fresh = connections.open(connections.slot().await, PEER).unwrap();
        let waiting = tokio::spawn({
            let connections = connections.clone();
            async move { connections.slot().await }
        });
        tokio::task::yield_now().await;
        let asked = tokio::time::timeout(Duration::from_millis(1), fresh.activity.asked_to_close());
        assert!(asked.await.is_err(), "not asked to close before it settled");
        drop(fresh);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_from_its_last_request() {
        let connections = connections(2, 2);
        let connection = connections.open(connections.slot().await, PEER).unwrap();
        let opened = Instant::now();
        assert_eq!(
            connection.idle_deadline(),
            Some(opened + Duration::from_secs(30))
        );
        let request = connection.activity.request();
        assert_eq!(connection.idle_deadline(), None);
        tokio::time::advance(Duration::from_secs(5)).await;
        drop(request);
        assert_eq!(
            connection.idle_deadline(),
            Some(opened + Duration::from_secs(35))
        );
    }
}
