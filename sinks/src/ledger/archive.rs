//! `archiveBeforeDelete`: before the DELETE, the object's final state goes to the policy's sink
//! as its `dev.retention.deleted` event, and only a 2xx lets the DELETE go. The object is read
//! afresh (one GET) and must still be the version judged, so the event carries exactly what is
//! deleted; a changed object is judged again, a gone one needs nothing.
//!
//! One attempt per try, its time bounded ([`ATTEMPT_TIMEOUT`]); the retry is the state's backoff
//! of a failed deletion (1 s doubling to 8 s, as for an unavailable API server), so an object
//! waits as long as its sink is down and nothing is deleted unannounced. Archives run beside the
//! executor's requests, [`IN_FLIGHT`] at a time, so a sink that hangs holds up only other
//! archives, never deletions without one.

use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::DynamicObject;
use kube_retention_common::kinds::Resource;
use kube_retention_common::ledger::{DELETED, Entry};
use tokio::sync::Semaphore;

use crate::{Delivery, Sender};
use kube_retention_common::model::object_value;

/// Archives under way at once.
pub const IN_FLIGHT: usize = 16;
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
}

impl Archiver {
    pub fn new(sender: Arc<Sender>) -> Self {
        Self {
            sender,
            permits: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }

    /// Reads `name` (of `resource`) through `api` and, if it is still `uid` at
    /// `resource_version`, sends it to `sink` within `entry`.
    pub async fn archive(
        &self,
        api: &Api<DynamicObject>,
        resource: &Resource,
        name: &str,
        (uid, resource_version): (&str, &str),
        sink: &str,
        entry: Entry,
    ) -> Archived {
        let Ok(_permit) = self.permits.acquire().await else {
            return Archived::Failed("the controller is stopping".into());
        };
        let object = match api.get_opt(name).await {
            Ok(Some(object)) => object,
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
        let once = Delivery {
            attempts: 1,
            first_backoff: Duration::ZERO,
            timeout: ATTEMPT_TIMEOUT,
        };
        match self.sender.deliver(sink, event, &once).await {
            Ok(()) => Archived::Acknowledged,
            Err(undelivered) => Archived::Failed(undelivered.note(sink)),
        }
    }
}
