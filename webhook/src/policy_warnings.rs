//! What admission tells whoever applies a valid policy that cannot work yet: a kind the cluster
//! does not serve, or one the controller may not list, watch, patch and delete. Warnings, not
//! denials: a policy applied before its CRD (GitOps ordering) or before its RBAC is fine, and
//! becomes Ready by itself. The kinds are looked at together, each its lookup then its
//! controller's permissions (both cached, [`crate::access`]).

use futures::StreamExt;
use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::{group_of, qualified};
use serde_json::Value;

use crate::Context;
use crate::writers::CONCURRENT_QUESTIONS;

pub async fn of(context: &Context, policy: &Value) -> Vec<String> {
    let resources: Vec<ResourceRef> = policy
        .pointer("/spec/resources")
        .cloned()
        .and_then(|resources| serde_json::from_value(resources).ok())
        .unwrap_or_default();
    // Made before the stream, not in its `map`: a closure there makes the future unprovably Send.
    let looking: Vec<_> = resources
        .iter()
        .enumerate()
        .map(|(index, resource)| of_resource(context, index, resource))
        .collect();
    futures::stream::iter(looking)
        .buffered(CONCURRENT_QUESTIONS)
        .filter_map(|warning| async move { warning })
        .collect()
        .await
}

/// The warning for `resource`, the policy's `index`th, if any.
async fn of_resource(context: &Context, index: usize, resource: &ResourceRef) -> Option<String> {
    let at = format!("spec.resources[{index}]");
    let api_version = &resource.api_version;
    let group = group_of(api_version);
    let named = qualified(&resource.kind, group);
    let plural = match context.access.served(api_version, &resource.kind).await {
        Ok(Some(plural)) => plural,
        Ok(None) => {
            return Some(format!(
                "{at}: {named} is not served by this cluster ({api_version}): the policy is not Ready until it is"
            ));
        }
        Err(error) => return Some(format!("{at}: could not look {named} up: {error}")),
    };
    let resource_name = qualified(&plural, group);
    match context.access.missing(group, &plural).await {
        Ok(missing) if missing.is_empty() => None,
        Ok(missing) => Some(format!(
            "{at}: kube-retention cannot act on {named} yet: grant its controller {} on {resource_name}",
            missing.join(", ")
        )),
        Err(error) => Some(format!(
            "{at}: could not check the controller's permissions on {resource_name}: {error}"
        )),
    }
}
