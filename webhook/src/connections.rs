//! The admission port's connections, bounded. At most `--max-connections` are open at once,
//! TLS handshakes included: the server accepts only when one of them is free, so a flood
//! waits in the kernel's accept queue, not in the webhook's memory or file descriptors. At
//! most `--max-connections-per-peer` come from one address, so one pod cannot hold them all; a
//! connection past that is closed as soon as it is accepted. A connection with no request in
//! flight for `--idle-connection-timeout` is closed, HTTP/1 and HTTP/2 alike (hyper closes
//! neither by itself: its HTTP/1 header timeout covers one request's wait, and HTTP/2 has no
//! idle timeout at all); the API server opens another when it next calls.
//!
//! When all are taken, room is made for the connection waiting, within two [`SETTLING`]s
//! whatever the open ones do. Every connection accepted at least one [`SETTLING`] ago may be
//! chosen: the one idle longest is asked to close (gracefully: it answers what it has begun);
//! where none is idle, the one whose oldest request began first is dropped, so connections
//! held by bodies that trickle in cannot keep the new one waiting; and one asked to close that
//! is still open a [`SETTLING`] later is dropped. The waiting connection looks again each time
//! one more may be chosen, so a flood of connections accepted together, or connections that
//! keep up short requests so that none is ever idle for long, delay it by a [`SETTLING`] at
//! most, not until they go.
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

/// How long a connection is left alone after it was accepted before it may be closed to make
/// room (time for a handshake, a request and its answer), and how long one asked to close for
/// room has to do so before it is dropped.
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

/// What one connection is doing: when it was accepted, its requests in flight and since when
/// each, since when it has had none, whether it was asked to close for room, and the signals
/// that ask it to close (gracefully, once idle) or to drop (at once, its requests with it).
pub struct Activity {
    accepted: Instant,
    state: Mutex<Requests>,
    close: Notify,
    drop: Notify,
}

struct Requests {
    next: u64,
    /// When each request in flight began.
    in_flight: BTreeMap<u64, Instant>,
    idle_since: Instant,
    /// When it was asked to close for room.
    asked_to_close: Option<Instant>,
}

/// Why, and how, a connection is chosen to make room; ordered from the first choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Choice {
    /// Asked to close a [`SETTLING`] ago or more and still open: dropped, the longest asked
    /// first.
    StillOpen(Instant),
    /// Idle: asked to close, the one idle longest first.
    Idle(Instant),
    /// Busy: dropped, the one whose oldest request began first.
    Busy(Instant),
}

impl Activity {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            accepted: now,
            state: Mutex::new(Requests {
                next: 0,
                in_flight: BTreeMap::new(),
                idle_since: now,
                asked_to_close: None,
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

    /// How it may be chosen to make room at `now`; `None` while it is left alone
    /// ([`Activity::left_alone_until`]).
    fn choice(&self, now: Instant) -> Option<Choice> {
        let state = self.lock();
        if now < self.left_alone_until(&state) {
            return None;
        }
        Some(
            match (state.asked_to_close, state.in_flight.values().min()) {
                (Some(asked), _) => Choice::StillOpen(asked),
                (None, None) => Choice::Idle(state.idle_since),
                (None, Some(oldest)) => Choice::Busy(*oldest),
            },
        )
    }

    /// Until when it is left alone, not to be chosen to make room: a [`SETTLING`] after it was
    /// accepted, and a [`SETTLING`] after it was asked to close.
    fn left_alone_until(&self, state: &Requests) -> Instant {
        let settled = self.accepted + SETTLING;
        let asked = state.asked_to_close;
        asked.map_or(settled, |asked| settled.max(asked + SETTLING))
    }

    /// Asks it to close for room, gracefully: it answers the requests it has begun.
    fn ask_to_close(&self, now: Instant) {
        self.lock().asked_to_close = Some(now);
        self.close.notify_one();
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

    /// A free place; while none is, connections are chosen to make room (`make_room`), one
    /// more each time one may be, until one has closed.
    pub async fn slot(&self) -> Slot {
        loop {
            if let Ok(permit) = self.slots.clone().try_acquire_owned() {
                return Slot { _permit: permit };
            }
            let look_again = self.make_room(Instant::now());
            tokio::select! {
                permit = self.slots.clone().acquire_owned() => {
                    let permit = permit.expect("the semaphore is never closed");
                    return Slot { _permit: permit };
                }
                () = tokio::time::sleep_until(look_again) => {}
            }
        }
    }

    /// Chooses one connection to make room at `now` (the first [`Choice`] of all that may be
    /// chosen) and asks it to close or drops it; returns when to look again, should no
    /// connection have closed by then: a [`SETTLING`] on (when the one asked may be dropped),
    /// or when the first of the others may be chosen. The API server's requests are answered
    /// in milliseconds, so the connections that hold their requests longest are the ones whose
    /// bodies trickle in (their requests end at the admission's deadline anyway).
    fn make_room(&self, now: Instant) -> Instant {
        let state = self.lock();
        let chosen = state
            .open
            .values()
            .filter_map(|activity| Some((activity.choice(now)?, activity)))
            .min_by_key(|(choice, _)| *choice);
        match chosen {
            Some((Choice::Idle(_), activity)) => activity.ask_to_close(now),
            Some((Choice::StillOpen(_) | Choice::Busy(_), activity)) => {
                activity.drop.notify_one();
            }
            None => {
                return state
                    .open
                    .values()
                    .map(|activity| activity.left_alone_until(&activity.lock()))
                    .min()
                    .unwrap_or(now + SETTLING)
                    .max(now + Duration::from_millis(1));
            }
        }
        now + SETTLING
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

    /// A connection from `peer` accepted in the next free place.
    async fn opened(connections: &Arc<Connections>, peer: IpAddr) -> Connection {
        let slot = connections.slot().await;
        connections
            .open(slot, peer)
            .expect("within the peer's bound")
    }

    /// A connection waiting for a place, as the accept loop waits.
    fn waiting_for_a_place(connections: &Arc<Connections>) -> tokio::task::JoinHandle<Slot> {
        let connections = connections.clone();
        tokio::spawn(async move { connections.slot().await })
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    #[tokio::test(start_paused = true)]
    async fn one_peer_gets_its_bound_and_no_more() {
        let connections = connections(10, 2);
        let mut open = Vec::new();
        for _ in 0..2 {
            open.push(opened(&connections, PEER).await);
        }
        assert!(connections.open(connections.slot().await, PEER).is_none());
        assert!(connections.open(connections.slot().await, OTHER).is_some());
        open.pop();
        assert!(connections.open(connections.slot().await, PEER).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn when_all_are_taken_the_idlest_is_asked_to_close() {
        let connections = connections(2, 2);
        let first = opened(&connections, PEER).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = opened(&connections, PEER).await;
        let _busy = second.activity.request();
        tokio::time::advance(SETTLING).await;
        let waiting = waiting_for_a_place(&connections);
        first.activity.asked_to_close().await;
        assert!(!waiting.is_finished());
        drop(first);
        let slot = waiting.await.unwrap();
        assert!(connections.open(slot, OTHER).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn when_none_is_idle_the_one_holding_its_request_longest_is_dropped() {
        let connections = connections(2, 2);
        let trickling = opened(&connections, PEER).await;
        let _held = trickling.activity.request();
        tokio::time::advance(Duration::from_secs(1)).await;
        let busy = opened(&connections, OTHER).await;
        let _answered_soon = busy.activity.request();
        tokio::time::advance(Duration::from_millis(10)).await;
        let waiting = waiting_for_a_place(&connections);
        trickling.activity.asked_to_drop().await;
        drop(trickling);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_just_accepted_is_left_to_settle() {
        let connections = connections(1, 1);
        let fresh = opened(&connections, PEER).await;
        let waiting = waiting_for_a_place(&connections);
        tokio::task::yield_now().await;
        let asked = tokio::time::timeout(Duration::from_millis(1), fresh.activity.asked_to_close());
        assert!(asked.await.is_err(), "not asked to close before it settled");
        drop(fresh);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_waiting_looks_again_once_one_has_settled() {
        // Every place taken by a connection just accepted: the one waiting asks the first
        // to settle, a settling later, instead of waiting for one to close by itself.
        let connections = connections(2, 2);
        let first = opened(&connections, PEER).await;
        tokio::time::advance(Duration::from_millis(300)).await;
        let _second = opened(&connections, PEER).await;
        let waiting = waiting_for_a_place(&connections);
        let started = Instant::now();
        let asked = tokio::time::timeout(SETTLING, first.activity.asked_to_close());
        asked.await.expect("asked to close once it settled");
        assert_eq!(started.elapsed(), SETTLING - Duration::from_millis(300));
        drop(first);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn one_asked_to_close_and_still_open_a_settling_later_is_dropped() {
        let connections = connections(1, 1);
        let stubborn = opened(&connections, PEER).await;
        tokio::time::advance(SETTLING).await;
        let waiting = waiting_for_a_place(&connections);
        stubborn.activity.asked_to_close().await;
        let asked = Instant::now();
        let dropped = tokio::time::timeout(2 * SETTLING, stubborn.activity.asked_to_drop());
        dropped
            .await
            .expect("dropped, still open a settling after it was asked to close");
        assert_eq!(asked.elapsed(), SETTLING);
        drop(stubborn);
        assert!(waiting.await.is_ok());
    }

    /// What a generated connection does while it is open.
    #[derive(Debug, Clone, Copy)]
    enum Conduct {
        /// Idle; closes `delay_ms` after it is asked to (past a settling, it is dropped first).
        Closes { delay_ms: u64 },
        /// Idle; never closes when asked, only when dropped.
        IgnoresClose,
        /// Keeps up requests of `length_ms`, `gap_ms` apart, so that it is never idle for
        /// long; never closes when asked.
        ShortRequests { length_ms: u64, gap_ms: u64 },
        /// Holds one request open, as a body that trickles in does, until dropped.
        Trickles,
    }

    fn conduct() -> impl proptest::strategy::Strategy<Value = Conduct> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..3000).prop_map(|delay_ms| Conduct::Closes { delay_ms }),
            Just(Conduct::IgnoresClose),
            (1u64..400, 0u64..400)
                .prop_map(|(length_ms, gap_ms)| Conduct::ShortRequests { length_ms, gap_ms }),
            Just(Conduct::Trickles),
        ]
    }

    /// Serves `connection` as the server does (closed when dropped, gracefully when asked if
    /// its conduct says so), doing what `conduct` says until then.
    async fn conducted(connection: Connection, conduct: Conduct) {
        let activity = connection.activity.clone();
        let behaving = async {
            match conduct {
                Conduct::Closes { delay_ms } => {
                    activity.asked_to_close().await;
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                }
                Conduct::IgnoresClose => std::future::pending().await,
                Conduct::ShortRequests { length_ms, gap_ms } => loop {
                    let request = activity.request();
                    tokio::time::sleep(Duration::from_millis(length_ms)).await;
                    drop(request);
                    tokio::time::sleep(Duration::from_millis(gap_ms)).await;
                },
                Conduct::Trickles => {
                    let _request = activity.request();
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            () = behaving => {}
            () = activity.asked_to_drop() => {}
        }
        drop(connection);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// Whatever the connections holding every place do, and however recently they were
        /// accepted, a connection waiting gets a place within a settling of the first of them
        /// settling (at most two settlings), and each one after it within two settlings.
        #[test]
        fn a_place_is_made_within_two_settlings_whatever_the_open_connections_do(
            open in proptest::collection::vec((0u64..2500, conduct()), 1..24),
            waiting in proptest::collection::vec(conduct(), 1..6),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            runtime.block_on(async {
                let connections = connections(open.len(), open.len());
                let start = Instant::now();
                let mut accepted = Vec::new();
                let mut by_offset = open.clone();
                by_offset.sort_by_key(|(offset, _)| *offset);
                for (offset_ms, conduct) in by_offset {
                    tokio::time::sleep_until(start + Duration::from_millis(offset_ms)).await;
                    let connection = opened(&connections, PEER).await;
                    accepted.push(Instant::now());
                    tokio::spawn(conducted(connection, conduct));
                }
                let first_settled = accepted.iter().min().unwrap().to_owned() + SETTLING;
                for (index, conduct) in waiting.into_iter().enumerate() {
                    let asked = Instant::now();
                    let bound = if index == 0 {
                        first_settled.saturating_duration_since(asked) + SETTLING
                    } else {
                        2 * SETTLING
                    };
                    let waited = Duration::from_millis(1) + bound;
                    let slot = tokio::time::timeout(waited, connections.slot())
                        .await
                        .unwrap_or_else(|_| panic!("connection {index} waited past {bound:?}"));
                    let connection = connections.open(slot, PEER).unwrap();
                    tokio::spawn(conducted(connection, conduct));
                }
            });
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_from_its_last_request() {
        let connections = connections(2, 2);
        let connection = opened(&connections, PEER).await;
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
