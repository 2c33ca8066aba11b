//! Objects the evaluator shed to stay within its memory bound, fetched again at their turn:
//! listed by name (one request; the controller may list every kind it watches, where `get` is
//! not among what an aggregated role must grant), tried [`FETCH_ATTEMPTS`] times at most, and
//! evaluated as if the watch had brought them. Each holds one of the few places among the works
//! coming back ([`kube_retention_evaluator::Bounds::returns`]) until it is back or given up.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};

use super::{Core, Evaluations};
use crate::metrics::ErrorLabels;
use kube_retention_evaluator::PolicyOutcome;
use kube_retention_state::{Action, ObjectKey};

/// How soon a failed fetch of a shed object is tried again...
const FETCH_RETRY: std::time::Duration = std::time::Duration::from_secs(5);
/// ...and how many times in all: a shed object holds one of the few places among the works
/// coming back ([`kube_retention_evaluator::Bounds::returns`]) while it is fetched.
const FETCH_ATTEMPTS: u32 = 3;

/// An object fetched again after the evaluator shed it: the version it stood for, and what the
/// list by its name answered (`None`: gone meanwhile, its watch says so too).
pub struct Fetched {
    pub(super) key: ObjectKey,
    pub(super) seq: u64,
    pub(super) object: Result<Option<DynamicObject>, kube::Error>,
}

impl Evaluations {
    /// Fetches the object `key` stood for in the version `seq`, if that is still its latest:
    /// the evaluator let it go, and its turn has come.
    pub(super) fn fetch_again(&self, core: &Core, key: ObjectKey, seq: u64) {
        if !self.latest(&key, seq) || !core.watches.is_running(key.kind) {
            self.evaluator.nothing_returned();
            return;
        }
        let resource = core.state.kinds()[key.kind].resource.api_resource();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &resource);
        let fetched = self.fetches.clone();
        tokio::spawn(async move {
            // Listed by its name, not read with a GET: the controller may list and watch every
            // kind it watches, and `get` is not among what an aggregated role must grant.
            let by_name = ListParams::default().fields(&format!("metadata.name={}", key.name));
            let object = api
                .list(&by_name)
                .await
                .map(|listed| listed.items.into_iter().next());
            fetched.send(Fetched { key, seq, object }).ok();
        });
    }

    /// An object fetched again: evaluated as if its watch had brought it, if nothing newer did
    /// meanwhile. Gone, or not fetched, it waits for its watch's next word of it.
    pub(super) fn on_fetched(&mut self, core: &mut Core, fetched: Fetched) -> Vec<Action> {
        let Fetched { key, seq, object } = fetched;
        if !self.latest(&key, seq) {
            self.evaluator.nothing_returned();
            return Vec::new();
        }
        match object {
            Ok(Some(mut object)) => {
                self.fetch_failures.remove(&key);
                object.managed_fields_mut().clear();
                self.returning = Some(key.clone());
                let actions = self.on_applied(core, key.kind, object, core.clock.now());
                if self.returning.take().is_some() {
                    // Judged without its expressions (no policy with any selects it now).
                    self.evaluator.nothing_returned();
                }
                actions
            }
            Ok(None) => {
                self.fetch_failures.remove(&key);
                self.evaluator.nothing_returned();
                let awaited = self.forget(&key);
                match awaited {
                    true => self.settle(core, key.kind),
                    false => Vec::new(),
                }
            }
            Err(error) => {
                let kind = core.state.kinds()[key.kind].resource.to_string();
                let labels = ErrorLabels {
                    kind: kind.clone(),
                    operation: "fetch",
                };
                core.metrics.errors.get_or_create(&labels).inc();
                let failed = self.fetch_failures.entry(key.clone()).or_default();
                *failed += 1;
                if *failed >= FETCH_ATTEMPTS {
                    // Its place among the works coming back goes to another: this object waits
                    // for its watch's next word of it.
                    tracing::warn!(namespace = %key.namespace, name = %key.name, %kind, %error, "fetching an object the evaluator shed failed {FETCH_ATTEMPTS} times; it is evaluated at its next change");
                    self.fetch_failures.remove(&key);
                    self.evaluator.nothing_returned();
                    let awaited = self.forget(&key);
                    return match awaited {
                        true => self.settle(core, key.kind),
                        false => Vec::new(),
                    };
                }
                tracing::warn!(namespace = %key.namespace, name = %key.name, %kind, %error, "fetching an object the evaluator shed failed; trying again");
                let again = self.sender.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(FETCH_RETRY).await;
                    again.send(PolicyOutcome::Shed { key, seq }).ok();
                });
                Vec::new()
            }
        }
    }
}
