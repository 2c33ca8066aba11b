//! Whether the cluster serves a kind, and under which plural: [`served`], the one lookup the
//! controller's start-up check, the webhook's warning about kinds the controller cannot act on,
//! the Cleaners' target kinds and `kubectl retention upcoming` all make. It lists one group
//! version (not the whole discovery tree) and tells "not served" (a 404, or a list without the
//! kind) apart from an API server that could not answer, which must never pass for "not served".
//! [`group_version`] is that listing alone, for a caller that remembers it ([`find`] then reads
//! a kind from it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};

/// A kind as the cluster serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// `kind` of `api_version` (`batch/v1`, `v1`) as the cluster serves it; `Ok(None)` where it is
/// not served; the API server's error where it could not say.
pub async fn served(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> kube::Result<Option<Served>> {
    let resources = group_version(client, api_version).await?;
    Ok(find(
        resources.as_deref().unwrap_or_default(),
        api_version,
        kind,
    ))
}

/// The resources the cluster serves in `api_version`; `Ok(None)` where it serves none (404).
pub async fn group_version(
    client: &Client,
    api_version: &str,
) -> kube::Result<Option<Vec<APIResource>>> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let listed = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client.list_api_group_resources(api_version).await
    };
    match listed {
        Ok(list) => Ok(Some(list.resources)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error),
    }
}

/// `kind` among `resources`, the listing of `api_version`.
pub fn find(resources: &[APIResource], api_version: &str, kind: &str) -> Option<Served> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    resources
        .iter()
        // Subresources (`jobs/status`) share their kind; the resource itself has no slash.
        .find(|resource| resource.kind == kind && !resource.name.contains('/'))
        .map(|resource| Served {
            resource: ApiResource::from_gvk_with_plural(&gvk, &resource.name),
            namespaced: resource.namespaced,
        })
}
