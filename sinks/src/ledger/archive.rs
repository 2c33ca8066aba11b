//! `archiveBeforeDelete`: before the DELETE, the object's final state goes to the policy's sink
//! as its `dev.retention.deleted` event, and only a 2xx lets the DELETE go. The object is read
//! afresh (one GET) and must still be the version judged, so the event carries exactly what is
//! deleted; a changed object is judged again, a gone one needs nothing.
//!
//! One attempt per try, its time bounded ([`ATTEMPT_TIMEOUT`]); the retry is the state's backoff
//! of a failed deletion (1 s doubling to 8 s, as for an unavailable API server), so an object
//! waits as long as its sink is down and nothing is deleted unannounced. Archives run beside the
//! executor's requests, [`IN_FLIGHT`] at a time and [`PER_NAMESPACE`] of one namespace's, so a
//! sink that hangs holds up only other archives, never deletions without one, and one
//! namespace's sink at most its own share of them. A failed attempt gives its places back at
//! once; its answer waits out the attempt's whole timeout outside them (a closed port and a
//! filtered one take as long, and hold a place no longer than it is used).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::Api;
use kube_retention_common::kinds::Resource;
use kube_retention_common::ledger::{DELETED, Entry};
use kube_retention_io::lean::{self, LeanObject};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::{Attempted, Sender, Undelivered};
use kube_retention_common::model::object_value;

/// Archives under way at once.
pub const IN_FLIGHT: usize = 16;
/// One namespace's archives under way at once.
pub const PER_NAMESPACE: usize = 4;
/// How long one attempt may take (a failed one takes all of it: see [`crate`]).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// What came of archiving an object.
#[derive(Debug)]
pub enum Archived {
    /// The sink answered 2xx: the DELETE may go.
    Acknowledged,
    /// The object is not the version judged any more: judge it again.
    Changed,
    /// The object is gone.
    Gone,
    /// Not acknowledged: the note says why, as Events may ("delivery failed", "refused by the
    /// sink policy"), never what the sink answered.
    Failed(String),
    /// The object could not be read: the API server's error.
    Unread(kube::Error),
}

/// Archives in flight, shared by the executor's tasks.
#[derive(Clone)]
pub struct Archiver {
    sender: Arc<Sender>,
    permits: Arc<Semaphore>,
    namespaces: Arc<Mutex<HashMap<Arc<str>, Arc<Semaphore>>>>,
}

/// A namespace's place among the archives under way; its semaphore is forgotten with the last.
struct NamespacePlace {
    permit: Option<OwnedSemaphorePermit>,
    namespace: Arc<str>,
    namespaces: Arc<Mutex<HashMap<Arc<str>, Arc<Semaphore>>>>,
}

impl Drop for NamespacePlace {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut namespaces = self
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only the map holds it: nobody has or waits for a place of this namespace.
        if namespaces
            .get(&self.namespace)
            .is_some_and(|semaphore| Arc::strong_count(semaphore) == 1)
        {
            namespaces.remove(&self.namespace);
        }
    }
}

impl Archiver {
    pub fn new(sender: Arc<Sender>) -> Self {
        Self {
            sender,
            permits: Arc::new(Semaphore::new(IN_FLIGHT)),
            namespaces: Arc::default(),
        }
    }

    /// A place among `namespace`'s archives, waiting for one.
    async fn place_of(&self, namespace: &str) -> Option<NamespacePlace> {
        let semaphore = self
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(Arc::from(namespace))
            .or_insert_with(|| Arc::new(Semaphore::new(PER_NAMESPACE)))
            .clone();
        let mut place = NamespacePlace {
            permit: None,
            namespace: Arc::from(namespace),
            namespaces: self.namespaces.clone(),
        };
        place.permit = Some(semaphore.acquire_owned().await.ok()?);
        Some(place)
    }

    /// Reads `name` (of `resource`) through `api` and, if it is still `uid` at
    /// `resource_version`, sends it to `sink` within `entry`.
    pub async fn archive(
        &self,
        api: &Api<LeanObject>,
        resource: &Resource,
        name: &str,
        (uid, resource_version): (&str, &str),
        sink: &str,
        entry: Entry,
    ) -> Archived {
        self.sender.settled().await;
        let stopping = || Archived::Failed("the controller is stopping".into());
        // Its namespace's place first: a namespace waiting for its own holds none of the others'.
        let Some(place) = self.place_of(api.namespace().unwrap_or_default()).await else {
            return stopping();
        };
        let Ok(permit) = self.permits.acquire().await else {
            return stopping();
        };
        // Decoded lean (`io/src/lean.rs`): within its bound of what it holds, its identity
        // alone past it, which is not the version judged (that one was within it).
        let object = match api.get_opt(name).await {
            Ok(Some(LeanObject(object))) if lean::past_bound(&object) => return Archived::Changed,
            Ok(Some(LeanObject(object))) => object,
            Ok(None) => return Archived::Gone,
            Err(error) => return Archived::Unread(error),
        };
        let current = (
            object.metadata.uid.as_deref().unwrap_or_default(),
            object
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default(),
        );
        if current != (uid, resource_version) {
            return Archived::Changed;
        }
        let value = object_value(resource, &object).unwrap_or_default();
        let entry = entry.with_object(&value);
        let Some(event) = super::event(DELETED, &entry) else {
            return Archived::Failed("the event could not be built".into());
        };
        let started = Instant::now();
        let attempted = self.sender.attempt(sink, event, ATTEMPT_TIMEOUT).await;
        drop((permit, place));
        let undelivered = match attempted {
            Attempted::Delivered => return Archived::Acknowledged,
            Attempted::Refused(refusal) => Undelivered::Refused(refusal),
            Attempted::Unsendable(error) => Undelivered::Unsendable(error),
            Attempted::Failed(error) => {
                tracing::debug!(sink, %error, "archive not acknowledged");
                tokio::time::sleep_until(started + ATTEMPT_TIMEOUT).await;
                Undelivered::Failed { attempts: 1 }
            }
        };
        Archived::Failed(undelivered.note(sink))
    }
}
