//! Whether the cluster serves a kind, and under which plural: [`served`], the one lookup the
//! controller's start-up check, the webhook's warning about kinds the controller cannot act on,
//! the Cleaners' target kinds and `kubectl retention upcoming` all make. It lists one group
//! version (not the whole discovery tree) and tells "not served" (a 404, or a list without the
//! kind) apart from an API server that could not answer, which must never pass for "not served".

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
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let listed = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client.list_api_group_resources(api_version).await
    };
    let resources = match listed {
        Ok(list) => list.resources,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(error) => return Err(error),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok(resources
        .into_iter()
        // Subresources (`jobs/status`) share their kind; the resource itself has no slash.
        .find(|resource| resource.kind == kind && !resource.name.contains('/'))
        .map(|resource| Served {
            resource: ApiResource::from_gvk_with_plural(&gvk, &resource.name),
            namespaced: resource.namespaced,
        }))
}
