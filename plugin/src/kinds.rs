//! KIND as kubectl takes it — plural, singular or Kind, optionally `.group` — resolved with
//! discovery to the API resource the cluster serves (its preferred version).

use anyhow::{Result, bail};
use kube::Client;
use kube::api::ApiResource;
use kube::discovery::{Discovery, Scope};

pub async fn resolve(client: &Client, name: &str) -> Result<ApiResource> {
    let wanted = name.to_ascii_lowercase();
    let (short, group) = match wanted.split_once('.') {
        Some((short, group)) => (short.to_owned(), Some(group.to_owned())),
        None => (wanted.clone(), None),
    };
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut found = Vec::new();
    for api_group in discovery.groups() {
        if group
            .as_deref()
            .is_some_and(|group| group != api_group.name())
        {
            continue;
        }
        for (resource, capabilities) in api_group.recommended_resources() {
            let kind = resource.kind.to_ascii_lowercase();
            let names = [resource.plural.as_str(), kind.as_str()];
            if names.contains(&short.as_str()) || format!("{kind}s") == short {
                if capabilities.scope != Scope::Namespaced {
                    bail!(
                        "{} is cluster-scoped: only namespaced kinds are pruned",
                        resource.kind
                    );
                }
                found.push(resource);
            }
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("the server doesn't have a resource type {name:?}"),
        _ => {
            let names: Vec<String> = found
                .iter()
                .map(|resource| format!("{}.{}", resource.plural, resource.group))
                .collect();
            bail!(
                "{name:?} is ambiguous: say which, e.g. {}",
                names.join(" or ")
            )
        }
    }
}
