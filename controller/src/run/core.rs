//! What every concern of the loop reads and drives: the state, the watches, the kinds served,
//! the metrics and the clock. The loop owns it and hands it to the concern an event is for —
//! policies ([`super::Policies`]), the kinds they govern ([`super::Governed`]), kinds found by
//! scans ([`super::Discovered`]), objects and their evaluations ([`super::Evaluations`]) — each
//! of which owns only its own data, and tells the loop what another concern must do.

use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube_retention_common::kinds::{Entry, KindId, RegistryError};

use crate::metrics::{ErrorLabels, KindLabels, Metrics};
use kube_retention_io::clock::Clock;
use kube_retention_io::watches::Watches;
use kube_retention_state::{Action, State};

pub struct Core {
    pub state: State,
    /// The configured kinds the cluster serves (the others are skipped).
    pub served: Vec<KindId>,
    pub watches: Watches,
    pub metrics: Metrics,
    /// The time the state is judged at.
    pub clock: Clock,
}

impl Core {
    /// The registry's id for `entry`'s kind, adding the entry if the kind is new.
    pub(super) fn kind_for(&mut self, entry: Entry) -> Result<KindId, RegistryError> {
        let resource = &entry.resource;
        match self
            .state
            .kinds()
            .find_group_kind(&resource.group, &resource.kind)
        {
            Some(id) => Ok(id),
            None => self.state.add_kind(entry),
        }
    }

    pub(super) fn watch_failed(&self, kind: KindId, error: &watcher::Error) {
        let resource = &self.state.kinds()[kind].resource;
        tracing::warn!(kind = %resource.kind, %error, "watch failed; retrying with backoff");
        self.metrics
            .errors
            .get_or_create(&ErrorLabels {
                kind: resource.to_string(),
                operation: "watch",
            })
            .inc();
    }

    /// An event of the metadata-only watch of `kind`'s unlabelled objects: stragglers the
    /// webhook never labelled, which the state labels.
    pub(super) fn on_unlabelled(
        &mut self,
        kind: KindId,
        event: Result<Event<PartialObjectMeta<DynamicObject>>, watcher::Error>,
    ) -> Vec<Action> {
        match event {
            Ok(Event::Init) => {
                self.state.labelling().relisted(kind);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                let now = self.clock.now();
                self.state.labelling().seen(kind, &object.metadata, now)
            }
            Ok(Event::InitDone) => Vec::new(),
            Ok(Event::Delete(object)) => {
                if let Some((namespace, name)) = namespaced_name(&object.metadata) {
                    self.state.labelling().gone(kind, namespace, name);
                }
                Vec::new()
            }
            Err(error) => {
                self.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }

    pub(super) fn update_gauges(&self) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let gauges = self.state.gauges(self.clock.now());
        for (kind, tracked) in gauges.tracked {
            let label = KindLabels {
                kind: self.state.kinds()[kind].resource.to_string(),
            };
            self.metrics
                .tracked
                .get_or_create(&label)
                .set(count(tracked));
        }
        self.metrics.in_backoff.set(count(gauges.in_backoff));
        let object_memory = self.watches.memory().held();
        self.metrics.object_memory.set(count(object_memory));
        self.metrics.overdue.set(count(gauges.overdue));
        self.metrics.held.set(count(gauges.held));
        let awaiting = count(gauges.awaiting_approval);
        self.metrics.awaiting_approval.set(awaiting);
        self.metrics.stragglers.set(count(gauges.stragglers));
        let counted = self.metrics.objects_left_out.get();
        if gauges.left_out > counted {
            let (heaviest, holding) = gauges.heaviest.unwrap_or_default();
            tracing::warn!(
                left_out = gauges.left_out - counted,
                %heaviest,
                holding,
                "objects left out at --max-tracked-objects: the namespace holding the most goes without; raise the bound with the memory limit"
            );
            (self.metrics.objects_left_out).inc_by(gauges.left_out - counted);
        }
    }
}

/// An object's namespace and name, where it has both.
pub(super) fn namespaced_name(metadata: &ObjectMeta) -> Option<(&str, &str)> {
    Some((metadata.namespace.as_deref()?, metadata.name.as_deref()?))
}
