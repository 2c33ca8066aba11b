//! Watches started and stopped by key at run time, for any owner: the controller's kinds
//! ([`crate::watches`]) and the Cleaners' targets both watch through a [`WatchSet`]. Each watch
//! runs in a task of its own, a member of the owner's supervised group, and hands the owner's loop
//! events already decoded, up to [`FORWARDED`] ahead: a tenant's large objects are decoded beside
//! the loop, not on it. What they hold ([`Held`]) is bounded for all the watches of an owner
//! together, [`FORWARDED_BYTES`] (an event heavier than that alone): a tenant's Cleaners watch up
//! to sixteen kinds, and a room for each watch was sixteen rooms. Counted in events only, 30 Jobs
//! of 20,000 `env` entries (13 MiB each as decoded) waited 16 deep for the loop
//! (docs/explanation/tenancy.md). An event is decoded only once it has its room ([`Ready`]): a
//! watch reads it as text and weighs it (`crate::lean::LeanText`), takes room for that weight,
//! and then decodes it, so a watch waiting holds one object's text, not what it holds decoded.
//! The room is taken in turn (tokio's semaphore is first come, first served), so a watch of heavy
//! events slows the others' by its turn and never starves them; it is an owner's, not the
//! process's, so that one loop slow to read holds up no other. Each event is then charged to
//! the process's one budget of decoded objects (`kube_retention_runtime::object_memory`), and
//! the charge goes on with it to whoever holds its object ([`WatchSet::next`]). A task that
//! ends without being stopped (a watch stream does not end on its own) or panics is a fault of
//! the group, and stops the controller.
//!
//! Every watch begins with the list [`Lists`] makes and restarts backed off
//! ([`crate::watch_backoff`]). Lists of objects take turns ([`ListTurns`], one for every owner);
//! lists of the controller's own configuration (policies, Cleaners, namespaces) do not: they
//! are small, and everything else waits for them.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures::{SinkExt, StreamExt, stream};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Resource};
use kube_retention_runtime::object_memory::{Charge, ObjectMemory};
use kube_retention_runtime::supervise::Group;
use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::initial_list::{Events, Lists};
use crate::list_turns::ListTurns;
use crate::watch_backoff::watch_backoff;

/// What every watch of a process shares: how lists are made, their turns, the supervised group
/// the watches' tasks are members of, and the budget of what they decode.
#[derive(Clone)]
pub struct Watching {
    pub lists: Lists,
    pub turns: ListTurns,
    pub tasks: Group,
    /// The budget every decoded event is charged to.
    pub memory: ObjectMemory,
}

/// What an event holds on the heap, for the bytes a watch may decode ahead of its owner's loop
/// ([`FORWARDED_BYTES`]): at least what it holds (`kube_retention_runtime::held`).
pub trait Held {
    fn held(&self) -> usize;
}

/// What a watch reads, made the event its owner's loop takes once there is room for that
/// ([`FORWARDED_BYTES`]): read as text and decoded then, or ready as read (any [`Held`] event).
pub trait Ready: Send + 'static {
    type Event: Send + 'static;

    /// At least what [`Ready::ready`]'s event holds, as [`Held`] says it.
    fn will_hold(&self) -> usize;

    /// The event, decoded.
    fn ready(self) -> Self::Event;
}

impl<E: Held + Send + 'static> Ready for E {
    type Event = E;

    fn will_hold(&self) -> usize {
        self.held()
    }

    fn ready(self) -> E {
        self
    }
}

/// The room of what is decoded ahead of an owner's loop ([`FORWARDED_BYTES`]): its watches'
/// events, and what else it reads on the way to the loop (objects fetched again); clones share
/// it. Each event is also charged to the process's budget of decoded objects ([`ObjectMemory`]).
#[derive(Clone, Debug)]
pub struct Room {
    ahead: Arc<Semaphore>,
    memory: ObjectMemory,
}

/// Room taken for an event: the owner's, given back as the loop takes the event, and the
/// object's [`Charge`] of the process's budget, which goes on with the object ([`Taken::charge`]).
#[derive(Debug)]
pub struct Taken {
    room: OwnedSemaphorePermit,
    charge: Charge,
}

impl Taken {
    /// The room ahead of the loop given back; the charge kept, for whoever holds the object
    /// next.
    pub fn charge(self) -> Charge {
        drop(self.room);
        self.charge
    }
}

impl Room {
    /// A room of [`FORWARDED_BYTES`] of its own, its events charged to `memory`.
    pub fn new(memory: ObjectMemory) -> Self {
        Self {
            ahead: Arc::new(Semaphore::new(FORWARDED_BYTES)),
            memory,
        }
    }

    /// `read` made ready once there is room for what it will hold, up to all of it (one heavier
    /// event goes alone), ahead of the loop and then in the process's budget; taken in turn.
    /// (`None` were the room closed, which nothing does.)
    pub async fn ready<R: Ready>(&self, read: R) -> Option<(R::Event, Taken)> {
        self.ready_making(read, |_| 0).await
    }

    /// As [`Room::ready`], the budget's charge also covering what its holder will make of the
    /// event (`making`, of what it will hold): taken at once, so that the holder need not
    /// wait for it later.
    pub async fn ready_making<R: Ready>(
        &self,
        read: R,
        making: impl FnOnce(usize) -> usize,
    ) -> Option<(R::Event, Taken)> {
        let will_hold = read.will_hold();
        let weight = will_hold.min(FORWARDED_BYTES);
        let weight = u32::try_from(weight).unwrap_or(u32::MAX);
        let room = self.ahead.clone().acquire_many_owned(weight).await.ok()?;
        let charged = will_hold.saturating_add(making(will_hold));
        let charge = self.memory.take(charged).await;
        Some((read.ready(), Taken { room, charge }))
    }
}

/// Watches by key `K`, delivering events `E`, each with its charge.
pub struct WatchSet<K, E> {
    watching: Watching,
    streams: SelectAll<BoxStream<'static, (E, Charge)>>,
    running: HashMap<K, Vec<Stop>>,
    /// For every watch of this set.
    room: Room,
}

/// Stops a watch: its task, and what it decoded ahead.
struct Stop {
    producer: tokio::task::AbortHandle,
    consumer: AbortHandle,
}

impl Stop {
    fn now(self) {
        self.producer.abort();
        self.consumer.abort();
    }
}

impl<K: Clone + Eq + Hash, E: Held + Send + 'static> WatchSet<K, E> {
    pub fn new(watching: Watching) -> Self {
        Self {
            streams: stream::select_all(Vec::new()),
            running: HashMap::new(),
            room: Room::new(watching.memory.clone()),
            watching,
        }
    }

    /// The events of `api`'s objects that `config` selects, listing in turn; `what` names the
    /// watch in the log.
    pub fn objects<R>(&self, api: Api<R>, config: watcher::Config, what: String) -> Events<R>
    where
        R: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let events = self.watching.lists.watch(api, config, what);
        self.watching.turns.taking(events.backoff(watch_backoff()))
    }

    /// The events of the controller's own configuration in `api`, listed without waiting a turn.
    pub fn configuration<R>(&self, api: Api<R>, what: String) -> Events<R>
    where
        R: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let events = self
            .watching
            .lists
            .watch(api, watcher::Config::default(), what);
        events.backoff(watch_backoff()).boxed()
    }

    /// Runs `events` as one of `key`'s watches (a key may have several), the member `name` of
    /// the supervised group; each is made ready once it has its room.
    pub fn start<R: Ready<Event = E>>(
        &mut self,
        key: K,
        name: String,
        mut events: BoxStream<'static, R>,
    ) {
        let (consumer, consuming) = AbortHandle::new_pair();
        let (mut sender, receiver) = futures::channel::mpsc::channel(FORWARDED);
        let room = self.room.clone();
        let producer = self.watching.tasks.spawn(name, async move {
            while let Some(read) = events.next().await {
                let Some((event, taken)) = room.ready(read).await else {
                    return Ok(());
                };
                if sender.send((event, taken)).await.is_err() {
                    // The loop stopped reading: it stopped this watch or is shutting down.
                    return Ok(());
                }
            }
            Err("the watch stream ended")
        });
        // The room ahead is given back as the loop takes the event; the charge goes with it.
        let received = receiver.map(|(event, taken): (E, Taken)| (event, taken.charge()));
        self.streams
            .push(Abortable::new(received, consuming).boxed());
        let stop = Stop { producer, consumer };
        self.running.entry(key).or_default().push(stop);
    }

    /// Stops `key`'s watches: nothing more of them reaches the loop.
    pub fn stop(&mut self, key: &K) {
        for stop in self.running.remove(key).into_iter().flatten() {
            stop.now();
        }
    }

    /// The room of what this set's watches decode ahead of the loop, for what else the loop
    /// reads on the way.
    pub fn room(&self) -> Room {
        self.room.clone()
    }

    /// The process's budget of decoded objects, which this set's events are charged to.
    pub fn memory(&self) -> &ObjectMemory {
        &self.watching.memory
    }

    pub fn is_running(&self, key: &K) -> bool {
        self.running.contains_key(key)
    }

    /// The keys watched.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.running.keys()
    }

    /// The next event of any watch, and what it is charged (dropped where the object is);
    /// pending (never `None`) while no watch runs.
    pub async fn next(&mut self) -> (E, Charge) {
        loop {
            match self.streams.next().await {
                Some(observed) => return observed,
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// Events a watch's task decodes ahead of the loop.
pub const FORWARDED: usize = 16;

/// What the events a set's watches decode ahead of its owner's loop may hold together; one
/// heavier event goes alone.
pub const FORWARDED_BYTES: usize = 8 * 1024 * 1024;
