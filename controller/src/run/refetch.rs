//! Objects the evaluator shed to stay within its memory bound, fetched again at their turn:
//! listed by name (one request; the controller may list every kind it watches, where `get` is
//! not among what an aggregated role must grant), tried [`FETCH_ATTEMPTS`] times at most, and
//! evaluated as if the watch had brought them. Each holds one of the few places among the works
//! coming back ([`kube_retention_evaluator::Bounds::returns`]) until it is back or given up.

use std::collections::HashMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube_retention_evaluator::PolicyOutcome;
use kube_retention_io::lean::LeanObject;
use tokio::sync::mpsc;

use crate::metrics::{ErrorLabels, Metrics};
use kube_retention_state::ObjectKey;

/// How soon a failed fetch of a shed object is tried again...
const FETCH_RETRY: std::time::Duration = std::time::Duration::from_secs(5);
/// ...and how many times in all: a shed object holds one of the few places among the works
/// coming back ([`kube_retention_evaluator::Bounds::returns`]) while it is fetched.
const FETCH_ATTEMPTS: u32 = 3;

/// An object fetched again after the evaluator shed it: the version it stood for, and what the
/// list by its name answered (`None`: gone meanwhile, its watch says so too).
pub struct Fetched {
    pub key: ObjectKey,
    pub seq: u64,
    object: Result<Option<DynamicObject>, kube::Error>,
}

/// What a fetch came to.
pub enum Refetched {
    /// The object, to evaluate as if its watch had brought it.
    Object(Box<DynamicObject>),
    /// Gone, or not fetched after [`FETCH_ATTEMPTS`]: it waits for its watch's next word of it.
    Given(ObjectKey),
    /// Fetched again after [`FETCH_RETRY`].
    Retrying,
}

/// Shed objects fetched again, and the failures of each.
pub struct Refetch {
    client: Client,
    fetches: mpsc::UnboundedSender<Fetched>,
    pub(super) fetched: mpsc::UnboundedReceiver<Fetched>,
    /// Where a failed fetch asks again, after [`FETCH_RETRY`]: as the evaluator's word that it
    /// shed the object.
    again: mpsc::UnboundedSender<PolicyOutcome>,
    failures: HashMap<ObjectKey, u32>,
}

impl Refetch {
    /// Fetches with `client`; a failed fetch asks `again`.
    pub fn new(client: Client, again: mpsc::UnboundedSender<PolicyOutcome>) -> Self {
        let (fetches, fetched) = mpsc::unbounded_channel();
        Self {
            client,
            fetches,
            fetched,
            again,
            failures: HashMap::new(),
        }
    }

    /// Fetches the object `key` (of `resource`) stood for in the version `seq`.
    pub fn fetch(&self, key: ObjectKey, seq: u64, resource: &ApiResource) {
        let api: Api<LeanObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, resource);
        let fetched = self.fetches.clone();
        tokio::spawn(async move {
            // Listed by its name, not read with a GET: the controller may list and watch every
            // kind it watches, and `get` is not among what an aggregated role must grant.
            let by_name = ListParams::default().fields(&format!("metadata.name={}", key.name));
            let object = api
                .list(&by_name)
                .await
                .map(|listed| listed.items.into_iter().next().map(DynamicObject::from));
            fetched.send(Fetched { key, seq, object }).ok();
        });
    }

    /// What `fetched` came to; `kind` names its kind in the log and the error metric.
    pub fn fetched(&mut self, fetched: Fetched, kind: String, metrics: &Metrics) -> Refetched {
        let Fetched { key, seq, object } = fetched;
        let error = match object {
            Ok(Some(object)) => {
                self.failures.remove(&key);
                return Refetched::Object(Box::new(object));
            }
            Ok(None) => {
                self.failures.remove(&key);
                return Refetched::Given(key);
            }
            Err(error) => error,
        };
        let labels = ErrorLabels {
            kind: kind.clone(),
            operation: "fetch",
        };
        metrics.errors.get_or_create(&labels).inc();
        let failed = self.failures.entry(key.clone()).or_default();
        *failed += 1;
        if *failed >= FETCH_ATTEMPTS {
            // Its place among the works coming back goes to another: this object waits for its
            // watch's next word of it.
            tracing::warn!(namespace = %key.namespace, name = %key.name, %kind, %error, "fetching an object the evaluator shed failed {FETCH_ATTEMPTS} times; it is evaluated at its next change");
            self.failures.remove(&key);
            return Refetched::Given(key);
        }
        tracing::warn!(namespace = %key.namespace, name = %key.name, %kind, %error, "fetching an object the evaluator shed failed; trying again");
        let again = self.again.clone();
        tokio::spawn(async move {
            tokio::time::sleep(FETCH_RETRY).await;
            again.send(PolicyOutcome::Shed { key, seq }).ok();
        });
        Refetched::Retrying
    }
}
