//! A restarted controller evaluates every Cleaner exactly once — after one LIST of Cleaners and
//! one of each kind their targets name — and not again before their period: restarts cost
//! neither a request per Cleaner nor a burst of evaluations.

use std::time::Duration;

use anyhow::Result;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Resource, ResourceExt};
use kube_retention_common::cleaner::Cleaner;
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::process::tracked;
use serde_json::json;

use super::{create_cleaner, expect, revision, revisions};
use crate::kinds::GROUP;
use crate::lists;
use crate::support::TestNamespace;
use crate::workloads::eventually;

const CLEANERS: usize = 5;

pub async fn evaluated_once(ns: TestNamespace) -> Result<()> {
    let revisions = revisions(&ns.env).await?;
    for index in 0..CLEANERS {
        let app = format!("app-{index}");
        revision(&ns, &revisions, &format!("{app}-00001"), &app, "Active").await?;
        create_cleaner(
            &ns,
            &app,
            json!({
                "ttl": "1s", "retry": {"period": "1h"},
                "targets": [{"name": "revisions", "includeWhenEvaluating": true, "delete": true,
                             "reference": {"apiGroup": "e2e.retention.dev", "version": "v1",
                                           "kind": "Revision", "matchLabels": {"app": app}}}],
                "conditions": ["!revisions.items.exists(r, r.status.phase == \"Active\")"]
            }),
        )
        .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Every Cleaner in the cluster is counted, and the trials before this one delete their
    // namespaces in the background: a Cleaner counted while its namespace goes may be gone
    // before the restarted controller lists, and be evaluated by nobody.
    let all: Api<Cleaner> = Api::all(ns.env.client.clone());
    let namespaces: Api<Namespace> = Api::all(ns.env.client.clone());
    eventually(
        Duration::from_secs(120),
        "no Cleaner left in a namespace being deleted",
        || async {
            for cleaner in all.list(&Default::default()).await?.items {
                let namespace = cleaner.namespace().unwrap_or_default();
                let going = namespaces
                    .get_opt(&namespace)
                    .await?
                    .is_none_or(|namespace| namespace.metadata.deletion_timestamp.is_some());
                if going {
                    return Ok(false);
                }
            }
            Ok(true)
        },
    )
    .await?;
    let cluster = ns.env.cluster.clone();
    let controller = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    controller.kill()?;
    let existing = all.list(&Default::default()).await?.items.len();
    let restarted_at = Timestamp::now();
    components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
    components::wait_for_controller(&cluster, cluster.controller_port, Duration::from_secs(30))?;
    let evaluations = || -> Result<u64> {
        let metrics = components::http_get(cluster.controller_port, "/metrics")?;
        Ok(metrics
            .lines()
            .filter(|line| line.starts_with("kube_retention_cleaner_evaluations_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum())
    };
    let expected = u64::try_from(existing)?;
    eventually(
        Duration::from_secs(15),
        "every Cleaner evaluated",
        || async { Ok(evaluations()? >= expected) },
    )
    .await?;
    // Let anything extra show up before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let evaluated = evaluations()?;
    expect(evaluated == expected, || {
        format!("{evaluated} evaluations after the restart for {existing} Cleaners")
    })?;
    let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
    let lists_since = |group: &str, resource| -> Result<usize> {
        Ok(lists::lists(&ns, &user, group, resource, restarted_at)?.total())
    };
    let cleaner_lists = lists_since(&Cleaner::group(&()), "cleaners")?;
    let revision_lists = lists_since(GROUP, "revisions")?;
    println!(
        "restart: {evaluated} evaluations for {existing} Cleaners, LISTs: cleaners {cleaner_lists}, revisions {revision_lists}"
    );
    expect(cleaner_lists == 1 && revision_lists == 1, || {
        format!("LISTs after the restart: cleaners {cleaner_lists}, revisions {revision_lists}")
    })?;
    for index in 0..CLEANERS {
        let name = format!("app-{index}");
        let cleaners: Api<Cleaner> = Api::namespaced(ns.env.client.clone(), &ns.name);
        expect(cleaners.get_opt(&name).await?.is_some(), || {
            format!("{name} was cleaned")
        })?;
    }
    Ok(())
}
