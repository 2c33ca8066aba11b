//! The one owner of what the controller learned of the cluster: it alone feeds the index
//! ([`Learned`]) with each source's updates, and after every change publishes the admin's
//! policy with the learned ranges denied too, for every sender to judge by; it counts the
//! ranges, logs each change (naming the object that said it: the admin's view, never the
//! tenant's), and settles the shared policy once every source has been heard from. A source
//! that fails is logged when it starts failing and when it is back, counted every time, and
//! what is known meanwhile still applies.

use std::collections::{BTreeMap, BTreeSet};

use kube_retention_common::sink_policy::{Change, Inside, Learned, Range, SinkPolicy};
use kube_retention_runtime::sinks::Publisher;

use super::Source;
use super::watch::{UNAVAILABLE_RETRY, Unavailable, Update};
use crate::metrics::{InsideLabels, SinkPolicyMetrics, WatchErrorLabels};

pub struct Owner {
    /// The admin's policy and what the controller knows of itself, denied whatever is learned.
    base: SinkPolicy,
    learned: Learned,
    publisher: Publisher,
    metrics: SinkPolicyMetrics,
    /// The sources that listed or failed at least once.
    heard: BTreeSet<Source>,
    /// The sources failing now, and why.
    failing: BTreeMap<Source, &'static str>,
    settled: bool,
}

impl Owner {
    pub fn new(base: SinkPolicy, publisher: Publisher, metrics: SinkPolicyMetrics) -> Self {
        Self {
            base,
            learned: Learned::default(),
            publisher,
            metrics,
            heard: BTreeSet::new(),
            failing: BTreeMap::new(),
            settled: false,
        }
    }

    /// Takes `update` into the index, publishing the policy if the deny list changed.
    pub fn handle(&mut self, update: Update) {
        let (source, object, change) = match update {
            Update::Listed(source, objects) => {
                let listed = format!("{} listed", objects.len());
                (source, listed, self.learned.reset(source.kind(), objects))
            }
            Update::Applied(source, name, ranges) => {
                let change = self.learned.apply(source.kind(), &name, ranges);
                (source, name, change)
            }
            Update::Deleted(source, name) => {
                let change = self.learned.delete(source.kind(), &name);
                (source, name, change)
            }
            Update::Failed(source, why) => {
                self.failed(source, why);
                self.settle_once_heard();
                return;
            }
        };
        self.heard.insert(source);
        if let Some(was) = self.failing.remove(&source) {
            tracing::info!(
                kind = source.kind(),
                was,
                "the sink policy's watch of this kind is back"
            );
        }
        if !change.is_empty() {
            tracing::info!(
                kind = source.kind(),
                object = %object,
                denied = %listed(&change.added),
                no_longer_denied = %listed(&change.removed),
                "the sink policy's ranges learned from the cluster changed"
            );
            self.publish(&change);
        }
        self.settle_once_heard();
    }

    fn failed(&mut self, source: Source, why: Unavailable) {
        let labels = WatchErrorLabels {
            kind: source.kind(),
            reason: why.label(),
        };
        self.metrics.watch_errors.get_or_create(&labels).inc();
        self.heard.insert(source);
        if self.failing.insert(source, why.label()) != Some(why.label()) {
            let retry = humantime::format_duration(UNAVAILABLE_RETRY);
            match &why {
                Unavailable::Forbidden => tracing::warn!(
                    kind = source.kind(),
                    "watching for the sink policy is forbidden: {} are not denied as sinks until the controller may list and watch {} (deploy/core/controller-rbac.yaml); tried again every {retry}",
                    source.says(),
                    source.resource(),
                ),
                Unavailable::NotServed => tracing::warn!(
                    kind = source.kind(),
                    "the cluster does not serve {} (Kubernetes before 1.33?): {} are not denied as sinks unless --cloud-event-sink-deny lists them; tried again every {retry}",
                    source.resource(),
                    source.says(),
                ),
                Unavailable::Failed(error) => tracing::warn!(
                    kind = source.kind(),
                    %error,
                    "watching for the sink policy failed; what it learned before still applies; retrying"
                ),
            }
        }
    }

    fn publish(&mut self, change: &Change) {
        self.publisher
            .publish(self.base.with_learned(&self.learned));
        let touched = change.added.iter().chain(&change.removed);
        let mut insides: Vec<Inside> = touched.map(|range| range.inside).collect();
        insides.dedup();
        for inside in insides {
            let count = i64::try_from(self.learned.count(inside)).unwrap_or(i64::MAX);
            let labels = InsideLabels {
                inside: inside.label(),
            };
            self.metrics.learned.get_or_create(&labels).set(count);
        }
    }

    /// Settles the shared policy once every source has listed or failed.
    fn settle_once_heard(&mut self) {
        if self.settled || self.heard.len() < Source::ALL.len() {
            return;
        }
        self.settled = true;
        self.publisher.settle();
        let counts: Vec<String> = Inside::ALL
            .iter()
            .map(|inside| format!("{}={}", inside.label(), self.learned.count(*inside)))
            .collect();
        let unavailable: Vec<&str> = self.failing.keys().map(|source| source.kind()).collect();
        tracing::info!(
            learned = %counts.join(" "),
            unavailable = ?unavailable,
            "the sink policy knows the cluster's insides: CloudEvents may be sent"
        );
    }
}

/// `ranges` for the log: `10.96.0.0/12 (the cluster's service CIDR), …`.
fn listed(ranges: &[Range]) -> String {
    ranges
        .iter()
        .map(|range| format!("{} ({})", range.net, range.inside.why()))
        .collect::<Vec<_>>()
        .join(", ")
}
