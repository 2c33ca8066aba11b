//! Start-up checks: which watched kinds the cluster serves, and whether this ServiceAccount may
//! do everything the controller needs. Missing permissions stop the controller with a list of
//! what to grant, never a controller that silently does nothing.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use kube_retention_runtime::discovery;

use kube_retention_common::kinds::{CONTROLLER_VERBS, KindId, Registry, Role};

use crate::{Error, Result};

/// The kinds to watch: served ones; an unserved optional kind is skipped with a note.
pub async fn served_kinds(client: &Client, kinds: &Registry) -> Result<Vec<KindId>> {
    let mut served = Vec::new();
    for (id, entry) in kinds.iter() {
        let resource = &entry.resource;
        // Any failure but "not served" is the API server unable to say, which must not pass for
        // "not served".
        let found = match discovery::served(client, &resource.api_version(), &resource.kind).await {
            Ok(served) => served.is_some_and(|served| served.resource.plural == resource.plural),
            Err(source) => {
                return Err(Error::Discovery {
                    api_version: resource.api_version(),
                    source,
                });
            }
        };
        match (found, entry.optional) {
            (true, _) => served.push(id),
            (false, true) => {
                tracing::info!(kind = %resource, version = %resource.version, "not served by this cluster; not watching it")
            }
            (false, false) => {
                return Err(Error::NotServed(format!(
                    "{} {}",
                    resource.api_version(),
                    resource.kind
                )));
            }
        }
    }
    Ok(served)
}

/// [`check_permissions`], retried every second while permissions are missing, for up to `grace`
/// (ClusterRole aggregation fills the controller's role moments after it is applied).
pub async fn await_permissions(
    client: &Client,
    kinds: &Registry,
    served: &[KindId],
    lease_namespace: Option<&str>,
    grace: std::time::Duration,
) -> Result<()> {
    let started = tokio::time::Instant::now();
    loop {
        match check_permissions(client, kinds, served, lease_namespace).await {
            Err(Error::MissingPermissions(missing)) if started.elapsed() < grace => {
                tracing::info!(missing = %missing.join("; "), "waiting for RBAC permissions");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            done => return done,
        }
    }
}

/// Fails with every missing permission when the controller may not do its work.
pub async fn check_permissions(
    client: &Client,
    kinds: &Registry,
    served: &[KindId],
    lease_namespace: Option<&str>,
) -> Result<()> {
    let mut needed: Vec<(String, String, &str, Option<String>)> = Vec::new();
    for &id in served {
        let entry = kinds.get(id);
        let resource = &entry.resource;
        let verbs: &[&str] = match entry.role {
            Role::Run { .. } | Role::Object => &CONTROLLER_VERBS,
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
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::AccessReview {
                permission: permission(verb, &group, &resource, namespace.as_deref()),
                source,
            })?;
        if !answer.status.is_some_and(|status| status.allowed) {
            missing.push(permission(verb, &group, &resource, namespace.as_deref()));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::MissingPermissions(missing))
}

/// A permission as the errors name it: `delete jobs (batch) in all namespaces`.
fn permission(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> String {
    let group = if group.is_empty() { "core" } else { group };
    let scope = namespace.map_or("all namespaces".to_owned(), |namespace| {
        format!("namespace {namespace}")
    });
    format!("{verb} {resource} ({group}) in {scope}")
}
