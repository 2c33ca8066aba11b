//! Leader failover between the controller's two pods while BuildRuns expire, one a second. The
//! leader is frozen (SIGSTOP: a hung or partitioned leader that cannot release its Lease) and its
//! pod deleted; the standby takes the Lease once it expires. The first deletion after that
//! comes within 5 s of the Lease's expiry, every BuildRun is deleted, and none twice (the API
//! server's audit log counts the controller's successful DELETEs).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube_retention_e2e::cluster::{CONTROLLER_SERVICE_ACCOUNT, SHIPPED_NAMESPACE};
use kube_retention_e2e::{LocalCluster, node::Node};
use libtest_mimic::Trial;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{create_buildrun, finish_buildrun, now_second, until_some};

const RUNS: i64 = 30;
const LEASE: &str = "kube-retention-controller";
const CONTROLLER_PODS: &str = "app.kubernetes.io/name=kube-retention-controller";

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "the_standby_controller_takes_over_from_a_hung_leader_within_5s_of_its_lease_expiring",
        failover,
    )]
}

async fn failover(ns: TestNamespace) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    // A test before this one may have rolled the controller out: its old leader released the
    // Lease and a new pod takes it within a retry period. Start once the Deployment has
    // settled: two Ready controller pods, none terminating, one of them holding the Lease.
    let holder = until_some(
        Duration::from_secs(120),
        "two Ready controller pods, one of them holding the Lease",
        || async {
            let listed = pods
                .list(&ListParams::default().labels(CONTROLLER_PODS))
                .await?;
            let ready: Vec<String> = listed
                .items
                .into_iter()
                .filter(crate::settled::ready)
                .filter_map(|pod| pod.metadata.name)
                .collect();
            let holder = leases
                .get(LEASE)
                .await?
                .spec
                .and_then(|spec| spec.holder_identity);
            Ok(holder.filter(|holder| ready.len() == 2 && ready.contains(holder)))
        },
    )
    .await?;
    let leader = pods.get(&holder).await?;
    let container = leader
        .status
        .and_then(|status| status.container_statuses)
        .and_then(|statuses| statuses.into_iter().next())
        .and_then(|status| status.container_id)
        .context("the leader's container")?;
    let id = container.trim_start_matches("containerd://");
    let pid = Node::container_pid(&ns.env.cluster, id)?;

    let finished = now_second();
    for index in 0..RUNS {
        let name = format!("run-{index:02}");
        let ttl = format!("{}s", 5 + index);
        create_buildrun(&ns, &name, "app", json!({"ttlAfterSucceeded": ttl})).await?;
    }
    for index in 0..RUNS {
        finish_buildrun(&ns, &format!("run-{index:02}"), true, finished).await?;
    }
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let mut gone: BTreeMap<String, Timestamp> = BTreeMap::new();
    let watch_until = |deadline: Timestamp| {
        let runs = runs.clone();
        async move {
            let mut seen = BTreeMap::new();
            while Timestamp::now() < deadline && seen.len() < RUNS as usize {
                let left: Vec<String> = runs
                    .list(&Default::default())
                    .await?
                    .items
                    .into_iter()
                    .filter_map(|run| run.metadata.name)
                    .collect();
                for index in 0..RUNS {
                    let name = format!("run-{index:02}");
                    if !left.contains(&name) {
                        seen.entry(name).or_insert_with(Timestamp::now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok(seen)
        }
    };
    gone.extend(watch_until(finished + SignedDuration::from_secs(8)).await?);

    // The leader hangs, and its pod goes: it can neither renew nor release the Lease.
    kill(Pid::from_raw(pid), Signal::SIGSTOP)?;
    let killed = Timestamp::now();
    let lease = leases.get(LEASE).await?.spec.context("a Lease spec")?;
    let renewed = lease.renew_time.context("a renewed Lease")?.0;
    let duration = i64::from(lease.lease_duration_seconds.context("a duration")?);
    let expires =
        Timestamp::from_second(renewed.as_second())? + SignedDuration::from_secs(duration);
    kube_retention_e2e::run(ns.env.kubectl().args([
        "delete",
        "pod",
        &holder,
        "--namespace",
        SHIPPED_NAMESPACE,
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]))?;
    let last_expiry = finished + SignedDuration::from_secs(5 + RUNS - 1);
    for (name, at) in watch_until(last_expiry.max(expires) + SignedDuration::from_secs(20)).await? {
        gone.entry(name).or_insert(at);
    }

    ensure!(
        gone.len() == RUNS as usize,
        "deleted {} of {RUNS}: {gone:?}",
        gone.len()
    );
    let first_after = gone
        .values()
        .filter(|at| **at > killed)
        .min()
        .context("deletions after the leader hung")?;
    let after_expiry = first_after.duration_since(expires);
    ensure!(
        after_expiry <= SignedDuration::from_secs(5),
        "the first deletion after the kill came {after_expiry:?} after the Lease expired ({expires})"
    );
    let successor = leases
        .get(LEASE)
        .await?
        .spec
        .and_then(|spec| spec.holder_identity)
        .context("a new holder")?;
    ensure!(successor != holder, "{holder} still holds the Lease");
    let user = LocalCluster::service_account_user_in(SHIPPED_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT);
    let deletes = successful_deletes(&ns, &user)?;
    for index in 0..RUNS {
        let name = format!("run-{index:02}");
        let count = deletes.iter().filter(|deleted| **deleted == name).count();
        ensure!(count == 1, "{name} deleted {count} times");
    }
    kube_retention_e2e::run(ns.env.kubectl().args([
        "rollout",
        "status",
        "deployment/kube-retention-controller",
        "--namespace",
        SHIPPED_NAMESPACE,
        "--timeout=120s",
    ]))
    .map(drop)
}

/// The names of the BuildRuns in `ns` that `user` deleted successfully, once per DELETE, from
/// the API server's audit log (tests/cluster/audit-policy.yaml records every DELETE).
pub fn successful_deletes(ns: &TestNamespace, user: &str) -> Result<Vec<String>> {
    let deletes = crate::audit::requests(ns, user, "delete", "buildruns", Some(&ns.name))?;
    Ok(deletes
        .into_iter()
        .filter(|event| {
            event["responseStatus"]["code"] == 200 || event["responseStatus"]["code"] == 202
        })
        .filter_map(|event| event["objectRef"]["name"].as_str().map(str::to_owned))
        .collect())
}
