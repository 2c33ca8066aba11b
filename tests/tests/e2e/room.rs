//! The bound on tracked objects (`--max-tracked-objects`) against the real API server: a namespace
//! editor's flood of annotated ConfigMaps past it is the one that goes without (its last ones, due
//! 30 s after they are created, are left out and stay past their deadline), another namespace's due
//! ConfigMap is deleted on time meanwhile, and once the flood's own deletions free a tenth of the
//! room its ConfigMaps left out are listed again, tracked and deleted (`state/src/room.rs`). This
//! restarts the shared controller with a small bound, so it runs with the disruptive trials.

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_retention_e2e::components;
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, restart_controller};
use crate::workloads::eventually;

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "a_namespace_flooding_the_tracked_bound_goes_without_and_another_is_deleted_on_time",
        flood,
    )]
}

/// The controller's bound for the trial, and the flood past it: its last [`SHORT`] due 30 s
/// after they are created, the rest in an hour.
const BOUND: usize = 300;
const FLOOD: usize = 400;
const SHORT: usize = 100;
/// The flood's ConfigMaps deleted to free room: more than a tenth of it.
const FREED: usize = 100;

const LEFT_OUT: &str = "kube_retention_objects_left_out_total";
const TRACKED: &str = r#"kube_retention_tracked_objects{kind="ConfigMap"}"#;

fn config_map(name: &str, ttl: &str) -> Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": {"retention.dev/ttl": ttl}},
        "data": {"k": "v"}
    }))?)
}

async fn flood(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let port = cluster.controller_port;
    let outcome = async {
        restart_controller(&cluster, &[format!("--max-tracked-objects={BOUND}")])?;
        let flooding: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), &ns.name);
        for index in 0..FLOOD {
            let ttl = if index < FLOOD - SHORT { "1h" } else { "30s" };
            let map = config_map(&format!("flood-{index:03}"), ttl)?;
            flooding.create(&PostParams::default(), &map).await?;
        }
        let flooded = Timestamp::now();
        let short_left = || async {
            let mut left = 0;
            for index in FLOOD - SHORT..FLOOD {
                let name = format!("flood-{index:03}");
                left += usize::from(flooding.get_opt(&name).await?.is_some());
            }
            anyhow::Ok(left)
        };
        eventually(
            Duration::from_secs(60),
            "the flood past the bound left out",
            || async { Ok(components::counter(port, LEFT_OUT)? >= (FLOOD - BOUND) as u64) },
        )
        .await?;
        let other = TestNamespace::create(&ns.env, "room-other").await?;
        let others: Api<ConfigMap> = Api::namespaced(ns.env.client.clone(), &other.name);
        let due = others
            .create(&PostParams::default(), &config_map("due", "2s")?)
            .await?;
        let created = due
            .metadata
            .creation_timestamp
            .map_or_else(Timestamp::now, |created| created.0);
        let deleted = eventually(
            Duration::from_secs(30),
            "the other namespace's due ConfigMap deleted",
            || async { Ok(others.get_opt("due").await?.is_none()) },
        )
        .await;
        let late = Timestamp::now().duration_since(created) - jiff::SignedDuration::from_secs(2);
        other.delete().await;
        deleted?;
        let tracked = components::counter(port, TRACKED)?;
        let left_out = components::counter(port, LEFT_OUT)?;
        ensure!(
            tracked <= BOUND as u64,
            "{tracked} ConfigMaps tracked, past the bound of {BOUND}"
        );
        // Left out, the flood's last ones stay past their deadline.
        let deadline = flooded + jiff::SignedDuration::from_secs(35);
        if let Ok(wait) = Duration::try_from(deadline.duration_since(Timestamp::now())) {
            tokio::time::sleep(wait).await;
        }
        let stayed = short_left().await?;
        ensure!(
            stayed == SHORT,
            "{} of the flood's {SHORT} ConfigMaps left out were deleted at their deadline",
            SHORT - stayed
        );
        // The flood deletes some of its own: a tenth of the room free, it is listed again, and
        // those left out are tracked and deleted, past their deadline as they are.
        let freed = Timestamp::now();
        for index in 0..FREED {
            let name = format!("flood-{index:03}");
            flooding.delete(&name, &DeleteParams::default()).await?;
        }
        eventually(
            Duration::from_secs(60),
            "the flood's ConfigMaps left out listed again and deleted",
            || async { Ok(short_left().await? == 0) },
        )
        .await?;
        let relisted = Timestamp::now().duration_since(freed);
        let after = components::counter(port, TRACKED)?;
        println!(
            "{FLOOD} ConfigMaps in one namespace at a bound of {BOUND}: {left_out} left out, \
             {tracked} tracked; another namespace's due ConfigMap deleted {:.1} s after its \
             deadline; its {SHORT} left out stayed past theirs until {FREED} of it were \
             deleted, then went within {:.1} s; {after} tracked after",
            late.as_secs_f64(),
            relisted.as_secs_f64()
        );
        Ok(())
    }
    .await;
    let restored = restart_controller(&cluster, &[]);
    outcome.and(restored)
}
