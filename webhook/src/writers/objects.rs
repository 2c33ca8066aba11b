//! What a write to an object needs: delete on the object for settings that tighten its own
//! deletion, delete on its runs for a parent's run settings.

use kube::api::DynamicObject;
use kube::core::admission::AdmissionRequest;
use kube_retention_common::tightening::{Reach, SET_THEIR_RETENTION, tightenings};
use kube_retention_common::{OwnSettings, Ttls};
use serde_json::Value;

use super::Need;
use crate::Context;
use crate::access::Request;

/// What the settings of `object` need, counting `from_parent`'s TTLs as not the writer's.
pub(super) fn object_needs(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
    from_parent: Ttls,
) -> Vec<Need> {
    let entry = context.kinds.entry_for(object);
    let namespace = request.namespace.clone();
    let resource = &request.resource;
    let mut needs = Vec::new();
    for tightening in tightenings(entry, old, object, from_parent) {
        let (targets, consequence) = match tightening.reach {
            Reach::Itself => (
                vec![(
                    resource.group.clone(),
                    resource.resource.clone(),
                    Some(request.name.clone()),
                )],
                SET_THEIR_RETENTION,
            ),
            Reach::Runs => (
                run_resources(context, object),
                "set the retention of the runs it governs",
            ),
        };
        for (group, plural, name) in targets {
            needs.push(Need {
                path: tightening.path.clone(),
                value: tightening.value.clone(),
                request: Request {
                    verb: "delete",
                    group,
                    resource: plural,
                    namespace: namespace.clone(),
                    name: name.filter(|name| !name.is_empty()),
                },
                consequence,
            });
        }
    }
    needs
}

/// The resources of the runs a parent governs (a Build's BuildRuns), as (group, plural, no name).
fn run_resources(context: &Context, object: &Value) -> Vec<(String, String, Option<String>)> {
    let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
    let Some(parent) = context.kinds.find(text("apiVersion"), text("kind")) else {
        return Vec::new();
    };
    context
        .kinds
        .runs_of(parent)
        .map(|run| {
            let resource = &context.kinds[run].resource;
            (resource.group.clone(), resource.plural.clone(), None)
        })
        .collect()
}

/// The run TTLs the parent a new run names sets: those the run carries were not its writer's
/// choice (mutation copied them). `None` for an update, an object that is not a run, or a parent
/// that cannot be read.
pub(super) async fn parent_ttls(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Option<Ttls> {
    let (Some(entry), Some(namespace), None) =
        (context.kinds.entry_for(object), &request.namespace, old)
    else {
        return None;
    };
    let parent = entry.parent()?;
    let kind = context.kinds.find_group_kind(parent.group, parent.kind)?;
    let name = parent.name_in(object)?;
    let parent_entry = &context.kinds[kind];
    match context
        .parents
        .get(&parent_entry.resource, namespace, name)
        .await
    {
        Ok(Some(found)) => Some(OwnSettings::read_as(parent_entry, &found).0.runs.ttls),
        Ok(None) | Err(_) => None,
    }
}
