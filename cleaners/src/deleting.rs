//! How a Cleaner deletes: what cleaning needs ([`Cleaning`]: the client, the shared request
//! budget and circuit breakers, the ledger, through which its CloudEvent goes too, and the
//! clock), and the one DELETE every clean sends:
//! [`Cleaning`] is the [`Deleter`] both the clean of a group ([`super::act`]) and a Helm
//! release's uninstall ([`kube_retention_helm::uninstall`]) delete through, the breakers'
//! admission (the Cleaner's namespace's, then the cluster's) and the budget's share first, so
//! neither goes around the breakers or the budget.

use kube::Client;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kube::runtime::events::Recorder;
use kube_retention_helm::uninstall::Deleter;
use kube_retention_io::breaker::Breaker;
use kube_retention_io::budget::Budget;
use kube_retention_io::clock::Clock;
pub use kube_retention_io::deletion::Sent;
use kube_retention_sinks::ledger::Ledger;

use super::metrics::CleanerMetrics;

/// What cleaning needs.
pub struct Cleaning {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: CleanerMetrics,
    pub propagation: PropagationPolicy,
    /// The controller's request budget: every DELETE waits for its share.
    pub budget: Budget,
    /// The circuit breakers, shared with the executor: every DELETE asks them first.
    pub breaker: Breaker,
    /// The deletion ledger: each target deleted is announced to `--ledger-sink`, and the
    /// Cleaner's CloudEvent goes through its lanes.
    pub ledger: Ledger,
    /// The controller's clock.
    pub clock: Clock,
    /// The blast-radius guard's threshold (`--max-immediate-deletions`): a clean deleting more
    /// at once waits for its generation's approval. 0: no guard.
    pub max_immediate_deletions: u32,
}

/// What a clean deleted, and what of its Helm release it left, why.
#[derive(Debug, Default)]
pub struct Cleaned {
    pub deleted: Vec<String>,
    pub release: Option<String>,
    /// `Kind/name: why`, for what the release's records list but Helm does not give to it.
    pub skipped: Vec<String>,
}

/// Every DELETE of a clean, and of a Helm release's uninstall: the circuit breakers' admission
/// in the object's namespace (waiting while one holds it) and its share of the request budget
/// first, then the request.
impl Deleter for Cleaning {
    fn client(&self) -> &Client {
        &self.client
    }

    async fn delete<K>(&self, api: &Api<K>, name: &str, params: &DeleteParams) -> kube::Result<Sent>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        self.breaker
            .admit_or_wait(api.namespace().unwrap_or_default())
            .await;
        self.budget.acquire().await;
        Sent::of(api.delete(name, params).await)
    }
}
