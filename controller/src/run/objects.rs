//! The kinds' watches in the loop: each object listed or changed goes to [`Evaluations`]
//! (judged at once, or once its expressions are evaluated), each gone leaves the state, and a
//! list's end — of a kind, or of a kind in one namespace a policy change asked for — lets the
//! blast-radius guards counting the kind decide.

use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use kube_retention_common::kinds::KindId;

use super::core::namespaced_name;
use super::evaluations::key_of;
use super::{Core, Evaluations};
use crate::metrics::KindLabels;
use kube_retention_runtime::object_memory::Charge;
use kube_retention_state::Action;

/// An event of a kind's watch.
pub type ObjectEvent = Result<Event<DynamicObject>, watcher::Error>;

impl Evaluations {
    /// An event of `kind`'s watch, and what its object is charged.
    pub(super) fn on_event(
        &mut self,
        core: &mut Core,
        kind: KindId,
        event: ObjectEvent,
        charge: Charge,
    ) -> Vec<Action> {
        let now = core.clock.now();
        match event {
            Ok(Event::Init) => {
                core.state.relist_started(kind);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                self.on_applied(core, kind, object, charge, now)
            }
            Ok(Event::InitDone) => {
                let resource = &core.state.kinds()[kind].resource;
                let tracked = core.state.gauges(now).tracked.get(&kind).copied();
                tracing::info!(kind = %resource.kind, tracked, "listed");
                let label = KindLabels {
                    kind: resource.to_string(),
                };
                core.metrics.lists.get_or_create(&label).inc();
                let mut actions = core.state.relist_done(kind, now);
                self.list_done(kind);
                actions.extend(self.settle(core, kind));
                actions.extend(core.state.due(now));
                actions
            }
            Ok(Event::Delete(object)) => {
                let awaited = key_of(kind, &object).is_some_and(|key| self.forget(&key));
                if let Some((namespace, name)) = namespaced_name(&object.metadata) {
                    core.state.removed(kind, namespace, name);
                }
                match awaited {
                    true => self.settle(core, kind),
                    false => Vec::new(),
                }
            }
            Err(error) => {
                core.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }

    /// A kind's objects in one namespace listed afresh: judged as the watch's are; the list's
    /// end counts for the blast-radius guards of that namespace's policies.
    pub(super) fn on_relisted(
        &mut self,
        core: &mut Core,
        kind: KindId,
        namespace: Arc<str>,
        event: ObjectEvent,
        charge: Charge,
    ) -> Vec<Action> {
        let now = core.clock.now();
        match event {
            Ok(Event::Init) => {
                core.state.namespace_relist_started(kind, &namespace);
                Vec::new()
            }
            Ok(Event::InitApply(object) | Event::Apply(object)) => {
                self.on_applied(core, kind, object, charge, now)
            }
            Ok(Event::InitDone) => {
                core.watches.relisted(kind, &namespace);
                core.state.namespace_relist_done(kind, &namespace);
                self.list_done_in(kind, &namespace);
                let mut actions = self.settle(core, kind);
                actions.extend(core.state.due(now));
                actions
            }
            // The kind's watch says which went.
            Ok(Event::Delete(_)) => Vec::new(),
            Err(error) => {
                core.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }
}
