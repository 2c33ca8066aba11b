//! KIND as kubectl takes it — plural, singular or Kind, optionally `.group` — resolved with
//! discovery to the API resource the cluster serves (its preferred version); and the kinds the
//! controller acts on, as it publishes them.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ApiResource;
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};
use kube_retention_common::kinds::{KINDS_ANNOTATION, KindSelection, Registry};

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

/// Where the controller publishes the kinds it acts on: its Lease.
#[derive(Debug, Clone)]
pub struct ControllerLease {
    pub namespace: String,
    pub name: String,
}

/// The controller's service account, as the chart and deploy/ name it.
const SERVICE_ACCOUNT: &str = "kube-retention-controller";

impl ControllerLease {
    /// The user the controller acts as: its service account, in the namespace it runs in.
    pub fn service_account(&self) -> String {
        format!("system:serviceaccount:{}:{SERVICE_ACCOUNT}", self.namespace)
    }
}

/// The kinds the controller acts on — its `--kind` and `--disable-kind` as its leader keeps them
/// on its Lease ([`KINDS_ANNOTATION`]), made a table by the function the controller uses
/// ([`KindSelection::registry`]) — and a note when they could not be read and the built-in
/// kinds stand in (no controller there, no leader yet, or no permission to read its Lease).
pub async fn of_controller(client: &Client, lease: &ControllerLease) -> (Registry, Option<String>) {
    match published(client, lease).await {
        Ok(registry) => (registry, None),
        Err(why) => (
            Registry::builtin().clone(),
            Some(format!(
                "judging with the built-in kinds: the controller's kinds were not read from \
                 Lease {}/{}: {why:#}",
                lease.namespace, lease.name
            )),
        ),
    }
}

async fn published(client: &Client, lease: &ControllerLease) -> Result<Registry> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let found = api
        .get_opt(&lease.name)
        .await?
        .context("it does not exist")?;
    let text = found
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(KINDS_ANNOTATION))
        .with_context(|| format!("it has no annotation {KINDS_ANNOTATION}"))?;
    let selection = KindSelection::from_annotation(text)
        .with_context(|| format!("its annotation {KINDS_ANNOTATION} is not a kind selection"))?;
    Ok(selection.registry()?)
}
