//! What admission tells whoever applies a valid policy that cannot work yet: a kind the cluster
//! does not serve, or one the controller may not list, watch, patch and delete. Warnings, not
//! denials: a policy applied before its CRD (GitOps ordering) or before its RBAC is fine, and
//! becomes Ready by itself.

use kube_retention_common::api::ResourceRef;
use kube_retention_common::kinds::{group_of, qualified};
use serde_json::Value;

use crate::Context;

pub async fn of(context: &Context, policy: &Value) -> Vec<String> {
    let resources: Vec<ResourceRef> = policy
        .pointer("/spec/resources")
        .cloned()
        .and_then(|resources| serde_json::from_value(resources).ok())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let at = format!("spec.resources[{index}]");
        let api_version = &resource.api_version;
        let group = group_of(api_version);
        let named = qualified(&resource.kind, group);
        let plural = match context.access.served(api_version, &resource.kind).await {
            Ok(Some(plural)) => plural,
            Ok(None) => {
                warnings.push(format!(
                    "{at}: {named} is not served by this cluster ({api_version}): the policy is not Ready until it is"
                ));
                continue;
            }
            Err(error) => {
                warnings.push(format!("{at}: could not look {named} up: {error}"));
                continue;
            }
        };
        let resource_name = qualified(&plural, group);
        match context.access.missing(group, &plural).await {
            Ok(missing) if missing.is_empty() => {}
            Ok(missing) => warnings.push(format!(
                "{at}: kube-retention cannot act on {named} yet: grant its controller {} on {resource_name}",
                missing.join(", ")
            )),
            Err(error) => warnings.push(format!(
                "{at}: could not check the controller's permissions on {resource_name}: {error}"
            )),
        }
    }
    warnings
}
