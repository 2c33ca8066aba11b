//! The sink policy a sender judges by, swapped whole while it runs: the controller's changes as
//! it learns the cluster (its service CIDRs, nodes, API server endpoints), and every connection
//! judges by the policy current when it is made. One [`Publisher`] — the owner of what is
//! learned — stores each new policy at once (arc-swap: a reader never waits and never sees half
//! a policy); everyone else holds a [`SharedPolicy`] and only reads.
//!
//! A shared policy is also *settled* or not: until its publisher has heard from every source it
//! learns from (listed, or failed and said so), what it knows is incomplete, and
//! [`SharedPolicy::settled`] waits, so a CloudEvent sent the moment the controller starts is not
//! judged by a policy that has not learned the cluster yet. A fixed policy is settled from the
//! start.

use std::sync::Arc;

use arc_swap::ArcSwap;
use kube_retention_common::sink_policy::SinkPolicy;
use tokio::sync::watch;

/// The policy in force, read by every connection.
#[derive(Clone, Debug)]
pub struct SharedPolicy {
    current: Arc<ArcSwap<SinkPolicy>>,
    settled: watch::Receiver<bool>,
}

/// Stores each new policy; the one writer of a [`SharedPolicy`].
#[derive(Debug)]
pub struct Publisher {
    current: Arc<ArcSwap<SinkPolicy>>,
    settled: watch::Sender<bool>,
}

/// A policy to be published, `initial` until then, not settled.
pub fn shared(initial: SinkPolicy) -> (Publisher, SharedPolicy) {
    let current = Arc::new(ArcSwap::from_pointee(initial));
    let (settled, settling) = watch::channel(false);
    let publisher = Publisher {
        current: current.clone(),
        settled,
    };
    let shared = SharedPolicy {
        current,
        settled: settling,
    };
    (publisher, shared)
}

impl SharedPolicy {
    /// A policy that never changes, settled.
    pub fn fixed(policy: Arc<SinkPolicy>) -> Self {
        let (_, settled) = watch::channel(true);
        Self {
            current: Arc::new(ArcSwap::new(policy)),
            settled,
        }
    }

    /// The policy in force now.
    pub fn load(&self) -> Arc<SinkPolicy> {
        self.current.load_full()
    }

    /// Waits until the publisher has heard from every source (at once for a fixed policy, or
    /// when the publisher is gone: then nothing more will be learned).
    pub async fn settled(&self) {
        let mut settled = self.settled.clone();
        // An error means the publisher is gone: what is known is all there will be.
        let _ = settled.wait_for(|settled| *settled).await;
    }

    /// Whether the publisher has heard from every source.
    pub fn is_settled(&self) -> bool {
        *self.settled.borrow()
    }
}

impl From<Arc<SinkPolicy>> for SharedPolicy {
    fn from(policy: Arc<SinkPolicy>) -> Self {
        Self::fixed(policy)
    }
}

impl From<SinkPolicy> for SharedPolicy {
    fn from(policy: SinkPolicy) -> Self {
        Self::fixed(Arc::new(policy))
    }
}

impl Publisher {
    /// Puts `policy` in force for every connection made from now on.
    pub fn publish(&self, policy: SinkPolicy) {
        self.current.store(Arc::new(policy));
    }

    /// Every source has been heard from: senders stop waiting.
    pub fn settle(&self) {
        self.settled.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn readers_see_each_published_policy_and_wait_until_it_is_settled() {
        let (publisher, shared) = shared(SinkPolicy::default());
        let address = "10.96.0.1".parse().expect("an address");
        assert_eq!(shared.load().check_address(address), Ok(()));
        let waiting = tokio::spawn({
            let shared = shared.clone();
            async move { shared.settled().await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiting.is_finished(), "not settled yet");
        let mut learned = SinkPolicy::default();
        learned.deny("10.96.0.0/12".parse().expect("a CIDR"), "a test's");
        publisher.publish(learned);
        assert!(shared.load().check_address(address).is_err());
        publisher.settle();
        waiting.await.expect("settled");
        assert!(shared.is_settled());
    }

    #[tokio::test]
    async fn a_fixed_policy_is_settled_and_a_gone_publisher_keeps_no_one_waiting() {
        let fixed = SharedPolicy::from(SinkPolicy::default());
        fixed.settled().await;
        assert!(fixed.is_settled());
        let (publisher, shared) = shared(SinkPolicy::default());
        drop(publisher);
        shared.settled().await;
        assert!(!shared.is_settled());
    }
}
