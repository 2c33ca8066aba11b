//! No confused deputy. kube-retention's controller deletes with its own power, so whoever writes
//! a retention setting borrows that power; a setting is admitted only from a writer who may
//! `delete` what it governs:
//! - a TTL added or shortened, an earlier `expires-at`, `keep` taken away (see
//!   [`kube_retention_common::tightening`]): delete on that object;
//! - stricter settings for a parent's runs (Build, BuildConfig): delete on those runs in the
//!   namespace;
//! - a RetentionPolicy created or its spec changed: delete and list on every resource it names,
//!   in its namespace; a ClusterRetentionPolicy: cluster-wide;
//! - a Cleaner created or its spec changed: delete on what it deletes, list on what it reads,
//!   delete on Secrets for a Helm release it uninstalls.
//!
//! Lengthening or removing a setting needs nothing more than the write itself, and neither do
//! kube-retention's own writes (its controller's stamps and labels). Answers come from
//! SubjectAccessReviews for the request's `userInfo`, cached per question for a few seconds. If
//! the API server cannot answer, the write is refused with the reason: a check that fails open is
//! no check.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use kube::api::DynamicObject;
use kube::core::admission::AdmissionRequest;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::cleaner::CleanerSpec;
use kube_retention_common::field_error::render;
use kube_retention_common::kinds::{Entry, group_of, qualified};
use kube_retention_common::tightening::{Reach, tightenings};
use kube_retention_common::{FieldError, Policy, Ttls};
use serde_json::Value;

use crate::Context;
use crate::access::{Request, Reviews, Subject};

pub type Allowed<'a> = Pin<Box<dyn Future<Output = Result<bool, kube::Error>> + Send + 'a>>;

/// Whether a writer may do what a setting needs. Behind a trait so unit tests need no cluster.
pub trait WriterAccess: Send + Sync {
    /// Whether `writer` may do `request`; with a name, being allowed on every object of the
    /// namespace is enough, and otherwise that object is asked about.
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Request) -> Allowed<'a>;
}

impl WriterAccess for Reviews {
    fn allowed<'a>(&'a self, writer: &'a Subject, request: &'a Request) -> Allowed<'a> {
        Box::pin(async move {
            let every = Request {
                name: None,
                ..request.clone()
            };
            let everywhere = self.review(writer, &every).await?;
            if everywhere || request.name.is_none() {
                return Ok(everywhere);
            }
            self.review(writer, request).await
        })
    }
}

/// The review could not be made: the write is refused with this.
#[derive(Debug, thiserror::Error)]
#[error("kube-retention could not check that you may {verb} {resource}: {source}")]
pub struct Unchecked {
    verb: &'static str,
    resource: String,
    #[source]
    source: kube::Error,
}

/// A permission a setting at `path` needs, with what to tell the writer who lacks it.
struct Need {
    path: String,
    value: String,
    request: Request,
    /// What the writer may not do, e.g. "set their retention".
    consequence: &'static str,
}

/// The settings of `object` its writer may not make, each naming what they lack; none for a
/// writer allowed everything needed, or for kube-retention's own writes.
pub async fn refusals(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Result<Vec<FieldError>, Unchecked> {
    let Some(writers) = &context.writers else {
        return Ok(Vec::new());
    };
    let writer = subject(request);
    if writer.user == context.controller_user {
        return Ok(Vec::new());
    }
    let needs = if crate::validate::is_policy(object) {
        policy_needs(context, object, old).await
    } else if crate::validate::is_cleaner(object) {
        cleaner_needs(context, object, old).await
    } else {
        object_needs(context, request, object, old).await
    };
    let mut refusals = Vec::new();
    let mut denied: BTreeSet<(String, String)> = BTreeSet::new();
    for need in needs {
        let allowed = writers
            .allowed(&writer, &need.request)
            .await
            .map_err(|source| Unchecked {
                verb: need.request.verb,
                resource: qualified(&need.request.resource, &need.request.group),
                source,
            })?;
        if !allowed && denied.insert((need.path.clone(), need.request.verb.to_owned())) {
            let rule = format!(
                "{}, so you may not {}",
                lacking(&need.request),
                need.consequence
            );
            refusals.push(FieldError {
                path: need.path,
                value: need.value,
                rule,
            });
        }
    }
    Ok(refusals)
}

fn subject(request: &AdmissionRequest<DynamicObject>) -> Subject {
    let info = &request.user_info;
    Subject {
        user: info.username.clone().unwrap_or_default(),
        groups: info.groups.clone().unwrap_or_default(),
        uid: info.uid.clone(),
        extra: info.extra.clone().unwrap_or_default(),
    }
}

/// "you may not delete configmaps in namespace team-a"
fn lacking(request: &Request) -> String {
    let resource = qualified(&request.resource, &request.group);
    match &request.namespace {
        Some(namespace) => format!(
            "you may not {} {resource} in namespace {namespace}",
            request.verb
        ),
        None => format!("you may not {} {resource} cluster-wide", request.verb),
    }
}

async fn object_needs(
    context: &Context,
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old: Option<&Value>,
) -> Vec<Need> {
    let entry = context.kinds.entry_for(object);
    let namespace = request.namespace.clone();
    let from_parent = match (entry, &namespace, old) {
        (Some(entry), Some(namespace), None) => {
            parent_ttls(context, entry, object, namespace).await
        }
        _ => Ttls::default(),
    };
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
                "set their retention",
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
/// choice (mutation copied them). None when the parent cannot be read.
async fn parent_ttls(context: &Context, entry: &Entry, object: &Value, namespace: &str) -> Ttls {
    let Some(parent) = entry.parent() else {
        return Ttls::default();
    };
    let (Some(kind), Some(name)) = (
        context.kinds.find_group_kind(parent.group, parent.kind),
        parent.name_in(object),
    ) else {
        return Ttls::default();
    };
    let parent_entry = &context.kinds[kind];
    match context
        .parents
        .get(&parent_entry.resource, namespace, name)
        .await
    {
        Ok(Some(found)) => Policy::read_as(parent_entry, &found).0.runs.ttls,
        Ok(None) | Err(_) => Ttls::default(),
    }
}

/// delete and list on each resource a policy names, where it applies, when it is new or its spec
/// changed. A kind the cluster does not serve yet has no resource name to ask about: the writer
/// must then be allowed on every resource of its group.
async fn policy_needs(context: &Context, object: &Value, old: Option<&Value>) -> Vec<Need> {
    let spec = object.get("spec");
    if old.is_some_and(|old| old.get("spec") == spec) {
        return Vec::new();
    }
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|_| object.get("kind").and_then(Value::as_str) == Some("RetentionPolicy"))
        .map(str::to_owned);
    let resources: Vec<ResourceRef> = spec
        .and_then(|spec| spec.get("resources"))
        .cloned()
        .and_then(|resources| serde_json::from_value(resources).ok())
        .unwrap_or_default();
    let mut needs = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let group = group_of(&resource.api_version).to_owned();
        let plural = match context
            .access
            .served(&resource.api_version, &resource.kind)
            .await
        {
            Ok(Some(plural)) => plural,
            Ok(None) | Err(_) => "*".to_owned(),
        };
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
                consequence: "make a retention policy for them",
            });
        }
    }
    needs
}

/// A Cleaner's: delete on each target it deletes, list on each it reads (the controller reads
/// them with its own power too), delete on Secrets for a Helm release it uninstalls (Helm keeps
/// its releases in Secrets), all in its namespace; when new or its spec changed.
async fn cleaner_needs(context: &Context, object: &Value, old: Option<&Value>) -> Vec<Need> {
    let spec = object.get("spec");
    if old.is_some_and(|old| old.get("spec") == spec) {
        return Vec::new();
    }
    let Ok(spec) = serde_json::from_value::<CleanerSpec>(spec.cloned().unwrap_or(Value::Null))
    else {
        return Vec::new();
    };
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut needs = Vec::new();
    for (index, target) in spec.targets.iter().enumerate() {
        let reference = &target.reference;
        let api_version = if reference.api_group.is_empty() {
            reference.version.clone()
        } else {
            format!("{}/{}", reference.api_group, reference.version)
        };
        let plural = match context.access.served(&api_version, &reference.kind).await {
            Ok(Some(plural)) => plural,
            Ok(None) | Err(_) => "*".to_owned(),
        };
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
        needs.push(Need {
            path: "spec.helm".to_owned(),
            value: render(&Value::String(helm.release)),
            request: Request {
                verb: "delete",
                group: String::new(),
                resource: "secrets".to_owned(),
                namespace,
                name: None,
            },
            consequence: "have a Cleaner uninstall a Helm release (Helm keeps it in Secrets)",
        });
    }
    needs
}
