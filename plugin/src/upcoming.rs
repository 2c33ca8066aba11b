//! `kubectl retention upcoming`: the next deletions, soonest first — of the kinds kube-retention
//! knows by name and those the policies name, in a namespace or all of them.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube_retention_common::api::{ClusterRetentionPolicy, RetentionPolicy};
use kube_retention_common::kinds::{Registry, Resource, Role};
use kube_retention_runtime::discovery::served;

use crate::explain::{COLUMNS, row};
use crate::model::{self, Explanation, Policies};
use crate::output::{self, Format};
use crate::scope::Scope;

#[derive(Debug, clap::Args)]
pub struct UpcomingArgs {
    #[command(flatten)]
    pub scope: Scope,
    /// Only deletions due within this long (e.g. 1h).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub within: Option<Duration>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

pub async fn run(client: Client, registry: &Registry, args: UpcomingArgs) -> Result<()> {
    let policies = Policies::load(&client).await?;
    let now = Timestamp::now();
    let horizon = args
        .within
        .map(|within| now + SignedDuration::try_from(within).unwrap_or(SignedDuration::MAX));
    let mut upcoming: Vec<Explanation> = Vec::new();
    for resource in kinds(&client, registry).await? {
        let api_resource = resource.api_resource();
        let api: Api<DynamicObject> = match (&args.scope.namespace, args.scope.all_namespaces) {
            (_, true) => Api::all_with(client.clone(), &api_resource),
            (Some(namespace), false) => {
                Api::namespaced_with(client.clone(), namespace, &api_resource)
            }
            (None, false) => {
                Api::namespaced_with(client.clone(), client.default_namespace(), &api_resource)
            }
        };
        let Ok(listed) = api.list(&ListParams::default()).await else {
            continue; // not served, or not readable by this user
        };
        for mut object in listed.items {
            object.types.get_or_insert_with(|| kube::api::TypeMeta {
                api_version: api_resource.api_version.clone(),
                kind: api_resource.kind.clone(),
            });
            let explanation = model::explain(registry, &resource, &object, &policies, now);
            if explanation
                .deadline
                .is_some_and(|at| horizon.is_none_or(|horizon| at <= horizon))
            {
                upcoming.push(explanation);
            }
        }
    }
    upcoming.sort_by(|a, b| {
        a.deadline
            .cmp(&b.deadline)
            .then_with(|| a.name.cmp(&b.name))
    });
    let rows: Vec<Vec<String>> = upcoming.iter().map(row).collect();
    if rows.is_empty() && args.output == crate::output::Format::Table {
        println!(
            "no deletions due{}",
            args.within
                .map(|within: Duration| format!(" within {}", humantime::format_duration(within)))
                .unwrap_or_default()
        );
        return Ok(());
    }
    output::print(args.output, &COLUMNS, &rows, &upcoming)
}

/// The controller's runs and annotated kinds' usual suspects, and every kind a policy names.
async fn kinds(client: &Client, registry: &Registry) -> Result<Vec<Resource>> {
    let mut kinds: Vec<Resource> = registry
        .iter()
        .filter(|(_, entry)| !matches!(entry.role, Role::Parent))
        .map(|(_, entry)| entry.resource.clone())
        .collect();
    let mut named = BTreeSet::new();
    let namespaced = Api::<RetentionPolicy>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|policy| policy.spec.rules);
    let cluster_wide = Api::<ClusterRetentionPolicy>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|policy| policy.spec.rules);
    for rules in namespaced.chain(cluster_wide) {
        named.extend(
            rules
                .resources
                .iter()
                .map(|reference| (reference.api_version.clone(), reference.kind.clone())),
        );
    }
    for (api_version, kind) in named {
        if kinds.iter().any(|known| known.is(&api_version, &kind)) {
            continue;
        }
        if let Ok(Some(served)) = served(client, &api_version, &kind).await {
            kinds.push(Resource::from(&served.resource));
        }
    }
    Ok(kinds)
}
