//! Truthful health: a controller whose executor dispatch (the task that deletes) ends must not
//! linger as a healthy pod that deletes nothing. The image built with the fault-injection
//! feature (`make image-faults`) is rolled out as one replica with
//! `KUBE_RETENTION_FAULT=executor-dispatch` after 40 s; the container exits non-zero naming the
//! task, the kubelet restarts it, and the restarted controller deletes an expired BuildRun.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube_retention_e2e::cluster::{SHIPPED_NAMESPACE, ShippedImage};
use kube_retention_e2e::node::Node;
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, shipwright};
use crate::workloads::{create_buildrun, eventually, finish_buildrun, now_second, until_some};

const CONTROLLER_PODS: &str = "app.kubernetes.io/name=kube-retention-controller";
/// Seconds from the container's start to the injected fault.
const FAULT_AFTER: u64 = 40;

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "a_controller_whose_executor_ends_exits_is_restarted_and_deletes_again",
        restarted,
    )]
}

async fn restarted(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let archive = std::env::var_os("KUBE_RETENTION_FAULTS_IMAGE")
        .context("KUBE_RETENTION_FAULTS_IMAGE: the archive of `make image-faults`")?;
    let faults = ShippedImage::imported(std::path::Path::new(&archive))?;
    Node::import_image(cluster, &faults.archive, &faults.repository)?;
    let chart = cluster.layout.repo_root.join("charts/kube-retention");
    let after = format!("controller.extraEnv[1].value={FAULT_AFTER}");
    let injected = cluster.helm_install(
        &chart,
        &faults,
        &[
            "--set",
            "controller.replicas=1,\
             controller.extraEnv[0].name=KUBE_RETENTION_FAULT,\
             controller.extraEnv[0].value=executor-dispatch,\
             controller.extraEnv[1].name=KUBE_RETENTION_FAULT_AFTER_SECONDS",
            "--set-string",
            &after,
        ],
    );
    let outcome = match injected {
        Ok(()) => restarted_and_deleting(&ns).await,
        Err(error) => Err(error),
    };
    // The shipped image and the chart's defaults again, for the tests after this one.
    cluster.helm_install(&chart, &crate::shipped_image()?, &[])?;
    outcome
}

async fn restarted_and_deleting(ns: &TestNamespace) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ns.env.client.clone(), SHIPPED_NAMESPACE);
    let pod_name = until_some(
        Duration::from_secs(3 * FAULT_AFTER),
        "the controller container exits and is restarted",
        || async {
            let listed = pods
                .list(&ListParams::default().labels(CONTROLLER_PODS))
                .await?;
            let restarted = listed.items.into_iter().find(|pod| {
                pod.metadata.deletion_timestamp.is_none()
                    && pod
                        .status
                        .as_ref()
                        .and_then(|status| status.container_statuses.as_ref())
                        .is_some_and(|statuses| statuses.iter().any(|s| s.restart_count > 0))
            });
            Ok(restarted.and_then(|pod| pod.metadata.name))
        },
    )
    .await?;
    let pod = pods.get(&pod_name).await?;
    let container = pod
        .status
        .and_then(|status| status.container_statuses)
        .and_then(|statuses| statuses.into_iter().next())
        .context("the controller container's status")?;
    let exit = container
        .last_state
        .and_then(|state| state.terminated)
        .context("the restarted container's last termination")?;
    ensure!(
        exit.exit_code != 0,
        "the controller exited {}",
        exit.exit_code
    );
    let previous = kube_retention_e2e::run(ns.env.kubectl().args([
        "logs",
        &pod_name,
        "--namespace",
        SHIPPED_NAMESPACE,
        "--previous",
    ]))?;
    ensure!(
        previous.contains("executor-dispatch"),
        "the last log names no task: {}",
        previous
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Restarted, it deletes again (before its own fault comes round).
    let runs = ns.dynamic(&shipwright("BuildRun"));
    create_buildrun(
        ns,
        "after-restart",
        "app",
        json!({"ttlAfterSucceeded": "1s"}),
    )
    .await?;
    let finished = now_second();
    finish_buildrun(ns, "after-restart", true, finished).await?;
    eventually(Duration::from_secs(15), "the BuildRun deleted", || async {
        Ok(runs.get_opt("after-restart").await?.is_none())
    })
    .await?;
    let late = jiff::Timestamp::now().duration_since(finished + SignedDuration::from_secs(1));
    println!("health: deleted {late:?} after expiry by the restarted controller");
    Ok(())
}
