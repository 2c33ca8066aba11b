//! Leader election on a coordination.k8s.io Lease, with client-go's semantics: every replica
//! checks the Lease every `retry` period; the holder renews it, others take it once it has gone
//! unrenewed for its duration (measured on their own clock, from when they saw it change, so clock
//! skew between nodes does not matter) or as soon as it is released. On shutdown the leader
//! releases it, so a successor takes over within one retry period.
//!
//! A leader that cannot renew steps down at its renew deadline (the Lease duration less a retry
//! period after its last renewal), before its Lease can expire elsewhere. The client has no
//! request timeout, so a check the API server does not answer is given up at that deadline (a
//! follower's after a Lease duration): an API server that stops answering does not keep a leader
//! leading.
//!
//! Written here because no crate has these semantics: kube-runtime has no elector, and
//! kube-lease-manager, the obvious crate, has its followers sleep until the Lease expires, so a
//! released Lease waited out its whole duration.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use kube_retention_runtime::supervise::{self, Supervised};
use tokio::sync::watch;
use tokio::time::Instant;

use kube_retention_io::clock::Clock;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    retry: Duration,
    /// Annotations the leader keeps on its Lease: what it tells `kubectl retention` about
    /// itself (its kinds).
    annotations: BTreeMap<String, String>,
    /// The wall clock the Lease's times are written by (its instants are tokio's).
    clock: Clock,
}

/// What this replica last saw of the Lease, and when (its own clock).
struct SeenLease {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    at: Instant,
}

impl Elector {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
        clock: Clock,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration,
            retry: (duration / 7).clamp(Duration::from_millis(500), Duration::from_secs(2)),
            annotations: BTreeMap::new(),
            clock,
        }
    }

    /// Has the leader keep `key: value` among its Lease's annotations (written when it creates,
    /// renews or takes the Lease).
    pub fn publishing(mut self, key: &str, value: String) -> Self {
        self.annotations.insert(key.to_owned(), value);
        self
    }

    fn annotate(&self, metadata: &mut ObjectMeta) {
        if !self.annotations.is_empty() {
            let annotations = metadata.annotations.get_or_insert_default();
            annotations.extend(self.annotations.clone());
        }
    }

    /// Runs the election in the background, as the supervised task `leader-election`. The
    /// receiver says whether this replica leads; drop it (and its clones) to step down, which
    /// releases the Lease before the task ends.
    pub fn spawn(self) -> (watch::Receiver<bool>, Supervised) {
        let (sender, receiver) = watch::channel(false);
        let task = supervise::spawn("leader-election", async move {
            let mut observed: Option<SeenLease> = None;
            // While leading: when it last renewed.
            let mut renewed_at: Option<Instant> = None;
            let renew_deadline = self.duration.saturating_sub(self.retry);
            loop {
                // A leader past its renew deadline steps down before asking: the answer may never
                // come. Otherwise the check is given up at the deadline.
                if renewed_at.is_some_and(|at| at.elapsed() >= renew_deadline) {
                    renewed_at = None;
                    publish(&sender, false);
                }
                let cutoff =
                    renewed_at.map_or(Instant::now() + self.duration, |at| at + renew_deadline);
                let check = self.try_acquire_or_renew(&mut observed);
                match tokio::time::timeout_at(cutoff, check).await {
                    Ok(Ok(true)) => renewed_at = Some(Instant::now()),
                    Ok(Ok(false)) => renewed_at = None,
                    Ok(Err(error)) => tracing::warn!(%error, "checking the leader lease"),
                    Err(_) => tracing::warn!("checking the leader lease: no answer"),
                }
                // A leader that cannot renew steps down before its Lease can expire elsewhere.
                let leading = renewed_at.is_some_and(|at| at.elapsed() < renew_deadline);
                publish(&sender, leading);
                tokio::select! {
                    () = tokio::time::sleep(self.retry) => {}
                    () = sender.closed() => {
                        if leading {
                            self.release().await;
                        }
                        return;
                    }
                }
            }
        });
        (receiver, task)
    }

    async fn try_acquire_or_renew(&self, observed: &mut Option<SeenLease>) -> kube::Result<bool> {
        let now = MicroTime(self.clock.now());
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let mut lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: i32::try_from(self.duration.as_secs()).ok(),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            self.annotate(&mut lease.metadata);
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec
            .holder_identity
            .clone()
            .filter(|holder| !holder.is_empty());
        let changed = observed
            .as_ref()
            .is_none_or(|seen| seen.holder != holder || seen.renew_time != spec.renew_time);
        if changed {
            *observed = Some(SeenLease {
                holder: holder.clone(),
                renew_time: spec.renew_time.clone(),
                at: Instant::now(),
            });
        }
        let lease_duration = spec
            .lease_duration_seconds
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(self.duration, Duration::from_secs);
        let held_by_other = holder
            .as_ref()
            .is_some_and(|holder| holder != &self.identity)
            && observed
                .as_ref()
                .is_some_and(|seen| seen.at.elapsed() < lease_duration);
        if held_by_other {
            return Ok(false);
        }
        let taking_over = holder.as_deref() != Some(self.identity.as_str());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: i32::try_from(self.duration.as_secs()).ok(),
            acquire_time: if taking_over {
                Some(now.clone())
            } else {
                spec.acquire_time
            },
            renew_time: Some(now),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + i32::from(taking_over)),
            ..spec
        });
        self.annotate(&mut lease.metadata);
        // replace carries the resourceVersion read above: of two replicas racing, one wins.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                if taking_over {
                    tracing::info!(identity = %self.identity, "acquired the leader lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(self.clock.now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(identity = %self.identity, "released the leader lease"),
            Err(error) => tracing::warn!(%error, "releasing the leader lease"),
        }
    }
}

/// Publishes whether this replica leads, waking the receivers only on a change.
fn publish(sender: &watch::Sender<bool>, leading: bool) {
    sender.send_if_modified(|current| std::mem::replace(current, leading) != leading);
}
