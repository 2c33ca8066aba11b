//! Start-up checks: which watched kinds the cluster serves, and whether this ServiceAccount may
//! do everything the controller needs. Missing permissions stop the controller with a list of
//! what to grant, never a controller that silently does nothing.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::kinds::{Role, WatchedKind};
use crate::{Error, Result};

/// Indexes of the kinds to watch: served ones; an unserved optional kind is skipped with a note.
pub async fn served_kinds(client: &Client, kinds: &[WatchedKind]) -> Result<Vec<usize>> {
    let mut served = Vec::new();
    for (index, kind) in kinds.iter().enumerate() {
        let resource = &kind.resource;
        let list = if resource.group.is_empty() {
            client.list_core_api_resources(&resource.version).await
        } else {
            client.list_api_group_resources(&resource.api_version).await
        };
        let found = list.is_ok_and(|list| {
            list.resources
                .iter()
                .any(|served| served.name == resource.plural)
        });
        match (found, kind.optional) {
            (true, _) => served.push(index),
            (false, true) => {
                tracing::info!(kind = %resource.kind, api_version = %resource.api_version, "not served by this cluster; not watching it")
            }
            (false, false) => {
                return Err(Error::Config(format!(
                    "{} {} is not served by this cluster",
                    resource.api_version, resource.kind
                )));
            }
        }
    }
    Ok(served)
}

/// Fails with every missing permission when the controller may not do its work.
pub async fn check_permissions(
    client: &Client,
    kinds: &[WatchedKind],
    served: &[usize],
    lease_namespace: Option<&str>,
) -> Result<()> {
    let mut needed: Vec<(String, String, &str, Option<String>)> = Vec::new();
    for &index in served {
        let resource = &kinds[index].resource;
        let verbs: &[&str] = match kinds[index].role {
            Role::Run { .. } => &["list", "watch", "patch", "delete"],
            Role::Parent => &["list", "watch"],
        };
        for verb in verbs {
            needed.push((resource.group.clone(), resource.plural.clone(), verb, None));
        }
    }
    needed.push(("events.k8s.io".into(), "events".into(), "create", None));
    if let Some(namespace) = lease_namespace {
        for verb in ["get", "create", "update"] {
            needed.push((
                "coordination.k8s.io".into(),
                "leases".into(),
                verb,
                Some(namespace.to_owned()),
            ));
        }
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    for (group, resource, verb, namespace) in needed {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group.clone()),
                    resource: Some(resource.clone()),
                    verb: Some(verb.to_owned()),
                    namespace: namespace.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if !answer.status.is_some_and(|status| status.allowed) {
            let group = if group.is_empty() {
                "core".to_owned()
            } else {
                group
            };
            let scope = namespace.map_or("all namespaces".to_owned(), |namespace| {
                format!("namespace {namespace}")
            });
            missing.push(format!("{verb} {resource} ({group}) in {scope}"));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Config(format!(
        "missing RBAC permissions, grant them (see deploy/core/controller-rbac.yaml): {}",
        missing.join("; ")
    )))
}
