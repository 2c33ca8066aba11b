//! The controller across crashes and replicas: after SIGKILL it catches up with one LIST per
//! kind, and with two replicas each expired object gets exactly one DELETE. These stop and start
//! the shared controller, so they run with the disruptive trials.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::PostParams;
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER, SECOND_CONTROLLER};
use kube_retention_e2e::process::tracked;
use libtest_mimic::Trial;
use serde_json::json;

use crate::audit;
use crate::lists;
use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{create_buildrun, eventually, finish_buildrun, finish_job, now_second};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "after_sigkill_100_due_objects_go_within_5s_with_one_list_per_watch",
            restart,
        ),
        env.trial(
            "two_replicas_send_exactly_one_delete_and_hand_over_on_sigterm",
            two_replicas,
        ),
    ]
}

fn controller_user() -> String {
    LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT)
}

pub(crate) async fn create_jobs(
    ns: &TestNamespace,
    prefix: &str,
    count: usize,
    annotations: serde_json::Value,
) -> Result<Vec<String>> {
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let mut names = Vec::new();
    for index in 0..count {
        let name = format!("{prefix}-{index}");
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}))?;
        jobs.create(&PostParams::default(), &job).await?;
        names.push(name);
    }
    Ok(names)
}

async fn restart(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let controller = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    controller.kill()?;

    let outcome = async {
        let ttl = json!({"retention.dev/ttl-after-finished": "2s"});
        let due = create_jobs(&ns, "due", 100, ttl.clone()).await?;
        let unfinished = create_jobs(&ns, "unfinished", 5, ttl.clone()).await?;
        let kept = create_jobs(
            &ns,
            "kept",
            5,
            json!({"retention.dev/ttl-after-finished": "2s", "retention.dev/keep": "true"}),
        )
        .await?;
        let finished = now_second();
        for name in due.iter().chain(&kept) {
            finish_job(&ns.env.client, &ns.name, name, true, finished).await?;
        }
        let expiry = finished + SignedDuration::from_secs(2);
        while Timestamp::now() < expiry + SignedDuration::from_millis(500) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let restarted_at = Timestamp::now();
        let started = Instant::now();
        components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
        let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
        eventually(
            Duration::from_secs(5),
            "all 100 due Jobs deleted within 5 s of the restart",
            || async {
                let left = jobs.list(&Default::default()).await?.items.len();
                Ok(left == unfinished.len() + kept.len())
            },
        )
        .await?;
        let took = started.elapsed();
        for name in unfinished.iter().chain(&kept) {
            ensure!(jobs.get_opt(name).await?.is_some(), "{name} must survive");
        }
        // Let the watches settle, then count the lists the restarted controller sent: streamed
        // (`--initial-list`'s default), none paged, where the API server streams.
        components::wait_for_controller(
            &cluster,
            cluster.controller_port,
            Duration::from_secs(10),
        )?;
        let mut lists = HashMap::new();
        for (group, resource) in [
            ("batch", "jobs"),
            ("", "pods"),
            ("shipwright.io", "buildruns"),
            ("shipwright.io", "builds"),
            ("build.openshift.io", "builds"),
            ("build.openshift.io", "buildconfigs"),
        ] {
            let listed = lists::lists(&ns, &controller_user(), group, resource, restarted_at)?;
            lists.insert(format!("{resource}.{group}"), listed);
        }
        // Jobs and Pods have two watches: the labelled objects, and a metadata-only one that
        // finds objects the webhook never labelled.
        let watches = |kind: &str| match kind {
            "jobs.batch" | "pods." => 2,
            _ => 1,
        };
        if crate::server::streams_lists(&ns.env)? {
            ensure!(
                lists.iter().all(|(kind, listed)| *listed
                    == lists::Lists {
                        paged: 0,
                        refused: 0,
                        streamed: watches(kind),
                    }),
                "lists per kind after the restart: {lists:?}"
            );
        } else {
            // A server that refuses streamed lists (1.33's default): each watch lists in pages
            // once. The first streamed list of each API is refused, which sends that API's other
            // watches to pages; that first one may be a watch of a kind not counted here (Nodes
            // share `/api` with Pods), so a kind sees at most its watches' refusals, and the
            // kinds counted here see at least one between them.
            ensure!(
                lists.iter().all(|(kind, listed)| listed.streamed == 0
                    && listed.paged == watches(kind)
                    && listed.refused <= watches(kind)),
                "lists per kind after the restart: {lists:?}"
            );
            let refused: usize = lists.values().map(|listed| listed.refused).sum();
            ensure!(
                refused >= 1,
                "no streamed list was refused after the restart: {lists:?}"
            );
        }
        println!("restart caught up in {took:?}; lists per kind {lists:?}");
        Ok::<(), anyhow::Error>(())
    }
    .await;
    if controller.live_pid().is_none() {
        components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
    }
    components::wait_for_controller(&cluster, cluster.controller_port, Duration::from_secs(30))?;
    outcome
}

fn is_leader(port: u16) -> bool {
    components::http_get(port, "/metrics").is_ok_and(|metrics| {
        metrics
            .lines()
            .any(|line| line == "kube_retention_leader 1")
    })
}

async fn two_replicas(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let second_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    components::start_controller(&cluster, SECOND_CONTROLLER, second_port, &[])?;
    let outcome = async {
        components::wait_for_controller(&cluster, second_port, Duration::from_secs(30))?;
        let runs = ns.dynamic(&shipwright("BuildRun"));
        let names: Vec<String> = (0..20).map(|index| format!("run-{index}")).collect();
        for name in &names {
            create_buildrun(&ns, name, "app", json!({"ttlAfterSucceeded": "2s"})).await?;
        }
        let finished = now_second();
        for name in &names {
            finish_buildrun(&ns, name, true, finished).await?;
        }
        eventually(Duration::from_secs(10), "all 20 deleted", || async {
            Ok(runs.list(&Default::default()).await?.items.is_empty())
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let deletes = audit::requests(
            &ns,
            &controller_user(),
            "delete",
            "buildruns",
            Some(&ns.name),
        )?;
        let mut per_object: HashMap<String, usize> = HashMap::new();
        for event in &deletes {
            let name = event["objectRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            *per_object.entry(name).or_default() += 1;
        }
        ensure!(
            per_object.len() == 20 && per_object.values().all(|count| *count == 1),
            "DELETEs per BuildRun: {per_object:?}"
        );

        // SIGTERM the leader: it releases the Lease and the other replica takes over at once.
        let (leader, follower_port) = if is_leader(cluster.controller_port) {
            (CONTROLLER, second_port)
        } else {
            ensure!(is_leader(second_port), "one replica leads");
            (SECOND_CONTROLLER, cluster.controller_port)
        };
        let stopped_at = Instant::now();
        tracked(&cluster.layout.state_dir, &[leader])
            .remove(0)
            .stop(Duration::from_secs(10))?;
        eventually(
            Duration::from_secs(5),
            "the other replica leads",
            || async { Ok(is_leader(follower_port)) },
        )
        .await?;
        println!("handover took {:?}", stopped_at.elapsed());
        create_buildrun(
            &ns,
            "after-handover",
            "app",
            json!({"ttlAfterSucceeded": "1s"}),
        )
        .await?;
        finish_buildrun(&ns, "after-handover", true, now_second()).await?;
        eventually(
            Duration::from_secs(5),
            "deleted by the new leader",
            || async { Ok(runs.get_opt("after-handover").await?.is_none()) },
        )
        .await?;
        Ok::<(), anyhow::Error>(())
    }
    .await;
    // Back to one replica, the usual one.
    tracked(&cluster.layout.state_dir, &[SECOND_CONTROLLER])
        .remove(0)
        .stop(Duration::from_secs(10))?;
    let primary = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    if primary.live_pid().is_none() {
        components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
    }
    components::wait_for_controller(&cluster, cluster.controller_port, Duration::from_secs(30))?;
    eventually(
        Duration::from_secs(20),
        "the primary leads again",
        || async { Ok(is_leader(cluster.controller_port)) },
    )
    .await?;
    outcome
}
