//! What a write of a retention policy or a Cleaner needs: permissions on each kind it names, in
//! its namespace (a ClusterRetentionPolicy: cluster-wide), when it is new or its spec changed, or
//! (a policy) when the write approves its deletions past the blast-radius guard. The plurals of
//! the kinds named are looked up together ([`super::CONCURRENT_QUESTIONS`] at a time; the
//! lookups themselves are cached, [`crate::access`]).
//!
//! A Cleaner that uninstalls a Helm release names no kinds: its release's records do, and they
//! are Secrets anyone who may write Secrets there can forge. Its writer is asked about every kind
//! a Cleaner uninstalls ([`UNINSTALLABLE_KINDS`]), one review a kind, cached and deduplicated
//! with the targets' like every other question. That list, not the controller's RBAC, bounds
//! what a forged record reaches, because the controller keeps to it too: its RBAC grows by
//! aggregation after a Cleaner is admitted, and reading it here would cost a discovery walk and
//! a review per served kind for every admission. One question a kind, no discovery, and sound.

use futures::StreamExt;
use kube_retention_common::annotations::APPROVED_GENERATION;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::cleaner::CleanerSpec;
use kube_retention_common::cleaner::helm::UNINSTALLABLE_KINDS;
use kube_retention_common::field_error::render;
use kube_retention_common::kinds::group_of;
use serde_json::Value;

use super::Need;
use crate::Context;
use crate::access::Request;

/// The plurals the cluster serves each (api_version, kind) of `kinds` under, in their order;
/// `*` (every resource of its group) for a kind it does not serve (yet), which has no resource
/// name to ask about.
async fn plurals(context: &Context, kinds: &[(String, String)]) -> Vec<String> {
    // Made before the stream, not in its `map`: a closure there makes the future unprovably Send.
    let lookups: Vec<_> = kinds
        .iter()
        .map(|(api_version, kind)| async move {
            match context.access.served(api_version, kind).await {
                Ok(Some(plural)) => plural,
                Ok(None) | Err(_) => "*".to_owned(),
            }
        })
        .collect();
    futures::stream::iter(lookups)
        .buffered(super::CONCURRENT_QUESTIONS)
        .collect()
        .await
}

/// The spec of a new object, or of one whose spec the write changed.
fn written_spec(object: &Value, old: Option<&Value>) -> Option<Value> {
    let spec = object.get("spec");
    let unchanged = old.is_some_and(|old| old.get("spec") == spec);
    (!unchanged).then(|| spec.cloned().unwrap_or(Value::Null))
}

/// Whether a write sets a policy's approval past its blast-radius guard anew.
fn approves(object: &Value, old: Option<&Value>) -> bool {
    let approval = |policy: &Value| {
        let annotations = policy.pointer("/metadata/annotations")?;
        annotations.get(APPROVED_GENERATION).cloned()
    };
    let new = approval(object);
    new.is_some() && new != old.and_then(approval)
}

/// delete and list on each resource a policy names, where it applies, when it is new, its spec
/// changed, or a write approves its deletions past the blast-radius guard. A kind the cluster
/// does not serve yet has no resource name to ask about: the writer must then be allowed on every
/// resource of its group.
pub(super) async fn policy_needs(
    context: &Context,
    object: &Value,
    old: Option<&Value>,
) -> Vec<Need> {
    let (spec, consequence) = match written_spec(object, old) {
        Some(spec) => (spec, "make a retention policy for them"),
        None if approves(object, old) => {
            let spec = object.get("spec").cloned().unwrap_or(Value::Null);
            (spec, "approve a retention policy's deletions of them")
        }
        None => return Vec::new(),
    };
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|_| object.get("kind").and_then(Value::as_str) == Some("RetentionPolicy"))
        .map(str::to_owned);
    let resources: Vec<ResourceRef> = spec
        .get("resources")
        .cloned()
        .and_then(|resources| serde_json::from_value(resources).ok())
        .unwrap_or_default();
    let kinds: Vec<(String, String)> = resources
        .iter()
        .map(|resource| (resource.api_version.clone(), resource.kind.clone()))
        .collect();
    let plurals = plurals(context, &kinds).await;
    let mut needs = Vec::new();
    for (index, (resource, plural)) in resources.iter().zip(plurals).enumerate() {
        let group = group_of(&resource.api_version).to_owned();
        let value = serde_json::to_value(resource).unwrap_or(Value::Null);
        for verb in ["delete", "list"] {
            needs.push(Need {
                path: format!("spec.resources[{index}]"),
                value: render(&value),
                request: Request {
                    verb,
                    group: group.clone(),
                    resource: plural.clone(),
                    namespace: namespace.clone(),
                    name: None,
                },
                consequence,
            });
        }
    }
    needs
}

/// A Cleaner's: delete on each target it deletes, list on each it reads (the controller reads
/// them with its own power too), delete on every kind a Cleaner uninstalls for a Helm release it
/// uninstalls ([`helm_needs`]), all in its namespace; when new or its spec changed.
pub(super) async fn cleaner_needs(
    context: &Context,
    object: &Value,
    old: Option<&Value>,
) -> Vec<Need> {
    let Some(Ok(spec)) = written_spec(object, old).map(serde_json::from_value::<CleanerSpec>)
    else {
        return Vec::new();
    };
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let kinds: Vec<(String, String)> = spec
        .targets
        .iter()
        .map(|target| {
            let reference = &target.reference;
            let api_version = if reference.api_group.is_empty() {
                reference.version.clone()
            } else {
                format!("{}/{}", reference.api_group, reference.version)
            };
            (api_version, reference.kind.clone())
        })
        .collect();
    let plurals = plurals(context, &kinds).await;
    let mut needs = Vec::new();
    for (index, (target, plural)) in spec.targets.iter().zip(plurals).enumerate() {
        let reference = &target.reference;
        let verbs: &[&'static str] = if target.delete {
            &["delete", "list"]
        } else {
            &["list"]
        };
        for &verb in verbs {
            needs.push(Need {
                path: format!("spec.targets[{index}]"),
                value: render(&Value::String(target.name.clone())),
                request: Request {
                    verb,
                    group: reference.api_group.clone(),
                    resource: plural.clone(),
                    namespace: namespace.clone(),
                    name: reference.name.clone().filter(|_| verb == "delete"),
                },
                consequence: "make a Cleaner of them",
            });
        }
    }
    if let Some(helm) = spec.helm.filter(|helm| helm.delete) {
        needs.extend(helm_needs(&helm.release, namespace));
    }
    needs
}

/// Uninstalling a Helm release: delete on every kind a Cleaner uninstalls, in its namespace.
/// Helm keeps a release in Secrets, and whoever may write Secrets there may write a record
/// listing objects of any of those kinds, which the controller then deletes with its own power
/// (only those Helm's annotations give to the release, but annotations are written by whoever
/// may write the object). So the writer must be allowed to delete them all: one question a
/// kind, their plurals known without discovery, no more than the kinds the controller keeps to
/// ([`UNINSTALLABLE_KINDS`], where the module says why a constant).
fn helm_needs(release: &str, namespace: Option<String>) -> impl Iterator<Item = Need> + '_ {
    UNINSTALLABLE_KINDS.iter().map(move |known| Need {
        path: "spec.helm".to_owned(),
        value: render(&Value::String(release.to_owned())),
        request: Request {
            verb: "delete",
            group: known.group.to_owned(),
            resource: known.plural.to_owned(),
            namespace: namespace.clone(),
            name: None,
        },
        consequence: "have a Cleaner uninstall a Helm release: its records are Secrets, and \
                      whoever may write them can make them list objects of every kind a Cleaner \
                      uninstalls",
    })
}
