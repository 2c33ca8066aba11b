//! Objects the evaluator shed to stay within its memory bound, fetched again at their turn:
//! listed by name (one request; the controller may list every kind it watches, where `get` is
//! not among what an aggregated role must grant), tried [`FETCH_ATTEMPTS`] times at most, and
//! evaluated as if the watch had brought them. Each holds one of the few places among the works
//! coming back ([`kube_retention_evaluator::Bounds::returns`]) until it is back or given up. Each
//! is read as text and decoded only once the room of what the watches decode ahead of the loop
//! has room for it ([`Room`]), as the watches' events are: a shed object is one a tenant may have
//! made as dense as the bound of one object allows, and four of them decoded at once were
//! 64 MiB beside that room.

use std::collections::HashMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube_retention_evaluator::{PolicyOutcome, value_bytes};
use kube_retention_io::lean::LeanText;
use kube_retention_io::watch_set::{Room, Taken};
use kube_retention_runtime::object_memory::Charge;
use tokio::sync::mpsc;

use crate::metrics::{ErrorLabels, Metrics};
use kube_retention_state::ObjectKey;

/// How soon a failed fetch of a shed object is tried again...
const FETCH_RETRY: std::time::Duration = std::time::Duration::from_secs(5);
/// ...and how many times in all: a shed object holds one of the few places among the works
/// coming back ([`kube_retention_evaluator::Bounds::returns`]) while it is fetched.
const FETCH_ATTEMPTS: u32 = 3;

/// An object fetched again after the evaluator shed it: the version it stood for, and what the
/// list by its name answered (`None`: gone meanwhile, its watch says so too), with the room it
/// takes until the loop has it.
pub struct Fetched {
    pub key: ObjectKey,
    pub seq: u64,
    object: Result<Option<(DynamicObject, Taken)>, kube::Error>,
}

/// What a fetch came to.
pub enum Refetched {
    /// The object, to evaluate as if its watch had brought it, and what it is charged.
    Object(Box<DynamicObject>, Charge),
    /// Gone, or not fetched after [`FETCH_ATTEMPTS`]: it waits for its watch's next word of it.
    Given(ObjectKey),
    /// Fetched again after [`FETCH_RETRY`].
    Retrying,
}

/// Shed objects fetched again, and the failures of each.
pub struct Refetch {
    client: Client,
    /// What is decoded ahead of the loop ([`Room`]), the watches' events with these.
    room: Room,
    fetches: mpsc::UnboundedSender<Fetched>,
    pub(super) fetched: mpsc::UnboundedReceiver<Fetched>,
    /// Where a failed fetch asks again, after [`FETCH_RETRY`]: as the evaluator's word that it
    /// shed the object.
    again: mpsc::UnboundedSender<PolicyOutcome>,
    failures: HashMap<ObjectKey, u32>,
}

impl Refetch {
    /// Fetches with `client`, decoding within `room`; a failed fetch asks `again`.
    pub fn new(client: Client, room: Room, again: mpsc::UnboundedSender<PolicyOutcome>) -> Self {
        let (fetches, fetched) = mpsc::unbounded_channel();
        Self {
            client,
            room,
            fetches,
            fetched,
            again,
            failures: HashMap::new(),
        }
    }

    /// Fetches the object `key` (of `resource`) stood for in the version `seq`.
    pub fn fetch(&self, key: ObjectKey, seq: u64, resource: &ApiResource) {
        let api: Api<LeanText> =
            Api::namespaced_with(self.client.clone(), &key.namespace, resource);
        let (fetched, room) = (self.fetches.clone(), self.room.clone());
        tokio::spawn(async move {
            // Listed by its name, not read with a GET: the controller may list and watch every
            // kind it watches, and `get` is not among what an aggregated role must grant.
            let by_name = ListParams::default().fields(&format!("metadata.name={}", key.name));
            let object = match api.list(&by_name).await {
                Ok(listed) => match listed.items.into_iter().next() {
                    // Charged for the model's JSON it comes back to be made into, too: work
                    // coming back is never shed again, so it cannot wait for that later.
                    Some(text) => Ok(room.ready_making(text, value_bytes).await),
                    None => Ok(None),
                },
                Err(error) => Err(error),
            };
            fetched.send(Fetched { key, seq, object }).ok();
        });
    }

    /// What `fetched` came to; `kind` names its kind in the log and the error metric.
    pub fn fetched(&mut self, fetched: Fetched, kind: String, metrics: &Metrics) -> Refetched {
        let Fetched { key, seq, object } = fetched;
        let error = match object {
            // The room ahead of the loop is given back now; the charge goes on with the object.
            Ok(Some((object, taken))) => {
                self.failures.remove(&key);
                return Refetched::Object(Box::new(object), taken.charge());
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::api::ApiResource;
    use kube_retention_common::Registry;
    use kube_retention_io::watch_set::{FORWARDED_BYTES, Held};
    use kube_retention_runtime::object_memory::{DEFAULT_BYTES, ObjectMemory};
    use serde_json::json;

    use super::*;

    /// An event said to hold the whole room.
    struct Heavy;

    impl Held for Heavy {
        fn held(&self) -> usize {
            FORWARDED_BYTES
        }
    }

    /// A shed object fetched again is decoded only once the room the watches decode in has room
    /// for it, and holds its share of that room until the loop has it.
    #[tokio::test(start_paused = true)]
    async fn an_object_fetched_again_is_decoded_within_the_watches_room() {
        let (client, mut server) = kube_retention_apimock::pair();
        let (again, _asked) = mpsc::unbounded_channel();
        let room = Room::new(ObjectMemory::new(DEFAULT_BYTES));
        let mut refetch = Refetch::new(client, room.clone(), again);
        let (_event, held) = room.ready(Heavy).await.expect("room");
        let kinds = Registry::builtin();
        let kind = kinds.named("Job.batch").expect("a built-in kind");
        let key = ObjectKey {
            kind,
            namespace: "tenant".into(),
            name: "shed".into(),
        };
        let resource = ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
        refetch.fetch(key.clone(), 7, &resource);
        let list = server.next().await.expect("the list by name");
        assert_eq!(list.path, "/apis/batch/v1/namespaces/tenant/jobs");
        assert!(
            list.query.contains("fieldSelector=metadata.name%3Dshed"),
            "{}",
            list.query
        );
        list.reply(
            200,
            &json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {},
                    "items": [{"metadata": {"name": "shed", "namespace": "tenant"},
                               "status": {"succeeded": 1}}]}),
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            refetch.fetched.try_recv().is_err(),
            "not decoded while the room is taken"
        );
        drop(held);
        let fetched = refetch.fetched.recv().await.expect("fetched");
        assert_eq!((fetched.key.clone(), fetched.seq), (key, 7));
        let Ok(Some((object, _taken))) = &fetched.object else {
            panic!("the object");
        };
        assert_eq!(object.data["status"]["succeeded"], 1);
        // Its room is held until the loop has it.
        let heavy = tokio::time::timeout(Duration::from_secs(1), room.ready(Heavy)).await;
        assert!(heavy.is_err(), "the object holds its share of the room");
        drop(fetched);
        assert!(room.ready(Heavy).await.is_some());
    }
}
