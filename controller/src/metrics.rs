//! The controller's Prometheus metrics.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use kube_retention_cleaners::metrics::CleanerMetrics;
use kube_retention_evaluator::EvaluatorMetrics;
use kube_retention_io::breaker::BreakerMetrics;
use kube_retention_io::initial_list::ListFallbackLabels;
use kube_retention_io::page_bytes::PageLabels;
use kube_retention_sinks::ledger::LedgerMetrics;
use kube_retention_sinks::metrics::SinkPolicyMetrics;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DeletionLabels {
    pub kind: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: String,
    pub operation: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct UnpermittedLabels {
    pub kind: String,
    pub missing: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub deletions: Family<DeletionLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub conflicts: Family<KindLabels, Counter>,
    pub stamps: Family<KindLabels, Counter>,
    pub tracked: Family<KindLabels, Gauge>,
    pub deletion_delay: Histogram,
    pub leader: Gauge,
    pub events_dropped: Counter,
    pub in_backoff: Gauge,
    pub overdue: Gauge,
    pub held: Gauge,
    pub awaiting_approval: Gauge,
    pub stragglers: Gauge,
    pub labelled: Counter,
    pub lists: Family<KindLabels, Counter>,
    pub list_fallbacks: Family<ListFallbackLabels, Counter>,
    pub list_pages_read_again: Family<PageLabels, Counter>,
    pub objects_past_bound: Family<KindLabels, Counter>,
    pub objects_left_out: Counter,
    pub unpermitted_kinds: Family<UnpermittedLabels, Gauge>,
    pub evaluations_queued: Gauge,
    pub object_memory: Gauge,
    pub evaluation_seconds: Histogram,
    pub cel_limit_exceeded: Counter,
    pub breaker: BreakerMetrics,
    pub cleaners: CleanerMetrics,
    pub ledger: LedgerMetrics,
    pub evaluator: EvaluatorMetrics,
    pub sink_policy: SinkPolicyMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("kube_retention");
        let deletions = Family::default();
        registry.register(
            "deletions",
            "Objects deleted, by kind and reason (ttl, limit)",
            deletions.clone(),
        );
        let errors = Family::default();
        registry.register(
            "errors",
            "Failed API requests, by kind and operation",
            errors.clone(),
        );
        let conflicts = Family::default();
        registry.register(
            "delete_conflicts",
            "DELETEs refused by their uid/resourceVersion preconditions (the object changed; re-judged)",
            conflicts.clone(),
        );
        let stamps = Family::default();
        registry.register(
            "stamps",
            "retention.dev/expires-at annotations written",
            stamps.clone(),
        );
        let tracked = Family::default();
        registry.register("tracked_objects", "Runs tracked, by kind", tracked.clone());
        // The buckets of kube-controller-manager's
        // ttl_after_finished_controller_job_deletion_duration_seconds, for comparison.
        let deletion_delay = Histogram::new(exponential_buckets(0.1, 2.0, 14));
        registry.register(
            "deletion_delay_seconds",
            "Time from when an object became eligible for deletion to its DELETE succeeding",
            deletion_delay.clone(),
        );
        let events_dropped = Counter::default();
        registry.register(
            "events_dropped",
            "Deletion Events dropped because the request budget left no room for them",
            events_dropped.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        let in_backoff = Gauge::default();
        registry.register(
            "objects_in_backoff",
            "Objects whose last write (DELETE, stamp, label) failed, waiting 1 s doubling to 5 min before the next",
            in_backoff.clone(),
        );
        let overdue = Gauge::default();
        registry.register(
            "overdue_objects",
            "Finished objects past their deadline and not deleted yet (waiting for the request budget, in flight or backing off; not those the blast-radius guard holds)",
            overdue.clone(),
        );
        let held = Gauge::default();
        registry.register(
            "held_deletions",
            "Deletions the blast-radius guard holds back until a policy's generation is approved",
            held.clone(),
        );
        let awaiting_approval = Gauge::default();
        registry.register(
            "policies_awaiting_approval",
            "Policies whose generation would delete more at once than their threshold, awaiting approval",
            awaiting_approval.clone(),
        );
        let stragglers = Gauge::default();
        registry.register(
            "unlabelled_objects",
            "Objects with retention settings the webhook never labelled, waiting for the controller to label them",
            stragglers.clone(),
        );
        let labelled = Counter::default();
        registry.register(
            "labelled",
            "Objects the webhook never saw, labelled retention.dev/managed by the controller",
            labelled.clone(),
        );
        let lists = Family::default();
        registry.register(
            "watch_lists",
            "Complete (re)lists of a kind by its watch: one at start, one more after each 410 Gone",
            lists.clone(),
        );
        let list_fallbacks = Family::default();
        registry.register(
            "list_fallbacks",
            "Streamed lists the API server refused or cut off, so listed in pages, by API and why: refused (it refuses streamed lists: every list of that API is paged from then on), timeout (the list outlasted its request: that watch pages from then on), cut (cut off early, most likely under churn: that list is paged, the next streamed)",
            list_fallbacks.clone(),
        );
        let list_pages_read_again = Family::default();
        registry.register(
            "list_pages_read_again",
            "Pages of paged lists that outweighed --list-page-memory, dropped unread and asked for again with half as many objects, by API",
            list_pages_read_again.clone(),
        );
        let objects_past_bound = Family::default();
        registry.register(
            "objects_past_bound",
            "Versions of objects whose data held more than 16 MiB decoded (a tree of small maps holds up to a hundred times its text), read past undecoded: such an object is not judged, nor deleted, until a version of it fits, by kind",
            objects_past_bound.clone(),
        );
        let objects_left_out = Counter::default();
        registry.register(
            "objects_left_out",
            "Objects left out of tracking at --max-tracked-objects (a new one of the namespace holding the most), or let go of to make room for another namespace's: not deleted until listed again once a tenth of the room is free",
            objects_left_out.clone(),
        );
        let unpermitted_kinds = Family::default();
        registry.register(
            "unpermitted_kind",
            "1 for each served namespaced kind the controller may not list, watch, patch and delete (the verbs missing): annotated objects of it are not deleted",
            unpermitted_kinds.clone(),
        );
        let object_memory = Gauge::default();
        registry.register(
            "object_memory_bytes",
            "Bytes tenants' decoded objects hold in the controller, every part's together, of --max-object-memory: at it, watches wait to decode until objects are let go of",
            object_memory.clone(),
        );
        let evaluations_queued = Gauge::default();
        registry.register(
            "policy_evaluations_queued",
            "Objects waiting for their retention policies' CEL expressions to be evaluated",
            evaluations_queued.clone(),
        );
        let evaluation_seconds = Histogram::new(exponential_buckets(0.0001, 4.0, 9));
        registry.register(
            "policy_evaluation_seconds",
            "Time to evaluate the CEL expressions of an object's retention policies",
            evaluation_seconds.clone(),
        );
        let cel_limit_exceeded = Counter::default();
        registry.register(
            "cel_limit_exceeded",
            "Evaluations of a retention policy's CEL expression stopped at its cost or time limit (the object is treated as not matching)",
            cel_limit_exceeded.clone(),
        );
        let breaker = BreakerMetrics::register(&mut registry);
        let cleaners = CleanerMetrics::register(&mut registry);
        let ledger = LedgerMetrics::register(&mut registry);
        let evaluator = EvaluatorMetrics::register(&mut registry);
        let sink_policy = SinkPolicyMetrics::register(&mut registry);
        Self {
            evaluator,
            sink_policy,
            breaker,
            cleaners,
            ledger,
            evaluations_queued,
            object_memory,
            evaluation_seconds,
            cel_limit_exceeded,
            registry: Arc::new(registry),
            lists,
            list_fallbacks,
            list_pages_read_again,
            objects_past_bound,
            objects_left_out,
            unpermitted_kinds,
            in_backoff,
            overdue,
            held,
            awaiting_approval,
            stragglers,
            labelled,
            deletions,
            errors,
            conflicts,
            stamps,
            tracked,
            deletion_delay,
            leader,
            events_dropped,
        }
    }
}

impl Metrics {
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding metrics");
        }
        text
    }
}
