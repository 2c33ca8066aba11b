//! The controller on the local cluster, running as its ServiceAccount: deletions on time and
//! never of the wrong object, limits, Jobs and Pods. Statuses are set through the /status
//! subresource, as Shipwright's or the job controller would.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::SignedDuration;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, ResourceExt};
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, object, shipwright};
use crate::workloads::{
    Stamp, create_buildrun, eventually, expect_deleted_on_time, finish_buildrun, now_second,
    sleep_until,
};

mod jobs_and_pods;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "succeeded_buildrun_is_stamped_and_deleted_within_a_second_of_expiry",
            succeeded_on_time,
        ),
        env.trial("failed_buildrun_uses_ttl_after_failed", failed_on_time),
        env.trial(
            "build_limit_deletes_the_oldest_and_a_lowered_limit_applies_at_once",
            limits,
        ),
        env.trial(
            "a_buildrun_recreated_under_the_same_name_survives",
            recreated,
        ),
        env.trial("keep_added_before_expiry_is_never_deleted", keep),
        env.trial("jobs_use_the_ttl_of_their_outcome", jobs_and_pods::jobs),
        env.trial(
            "finished_pod_with_ttl_after_finished_is_deleted",
            jobs_and_pods::pods,
        ),
        env.trial("deletions_are_recorded_as_events_on_the_parent", events),
        env.trial(
            "missing_rbac_stops_the_controller_with_what_to_grant",
            missing_rbac,
        ),
    ]
}

/// A finished BuildRun gets expires-at = finish + TTL, exists just before it and is gone
/// within a second after.
async fn check_on_time(ns: &TestNamespace, succeeded: bool) -> Result<()> {
    create_buildrun(
        ns,
        "run",
        "app",
        json!({"ttlAfterSucceeded": "3s", "ttlAfterFailed": "2s"}),
    )
    .await?;
    let finished = now_second();
    finish_buildrun(ns, "run", succeeded, finished).await?;
    let ttl = if succeeded { 3 } else { 2 };
    let expiry = finished + SignedDuration::from_secs(ttl);
    expect_deleted_on_time(ns, "run", expiry, Stamp::Deadline).await
}

async fn succeeded_on_time(ns: TestNamespace) -> Result<()> {
    check_on_time(&ns, true).await
}

async fn failed_on_time(ns: TestNamespace) -> Result<()> {
    check_on_time(&ns, false).await
}

async fn limits(ns: TestNamespace) -> Result<()> {
    let builds = ns.dynamic(&shipwright("Build"));
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let build = object(
        &shipwright("Build"),
        json!({"metadata": {"name": "app"}, "spec": {
            "source": {"type": "Git", "git": {"url": "https://github.com/shipwright-io/sample-go"}},
            "strategy": {"kind": "ClusterBuildStrategy", "name": "buildkit"},
            "output": {"image": "registry.example/app:latest"},
            "retention": {"succeededLimit": 2}}}),
    )?;
    builds.create(&PostParams::default(), &build).await?;
    for name in ["run-1", "run-2", "run-3", "run-4", "run-5"] {
        create_buildrun(&ns, name, "app", json!({})).await?;
    }
    for name in ["run-1", "run-2", "run-3", "run-4"] {
        finish_buildrun(&ns, name, true, now_second()).await?;
    }
    let names = || async {
        let mut names: Vec<String> = runs
            .list(&Default::default())
            .await?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        Ok::<_, anyhow::Error>(names)
    };
    eventually(
        Duration::from_secs(10),
        "the two oldest succeeded runs deleted",
        || async { Ok(names().await? == ["run-3", "run-4", "run-5"]) },
    )
    .await?;

    let lowered = json!({"spec": {"retention": {"succeededLimit": 1}}});
    builds
        .patch("app", &PatchParams::default(), &Patch::Merge(&lowered))
        .await?;
    eventually(
        Duration::from_secs(10),
        "one more deleted after lowering the limit",
        || async { Ok(names().await? == ["run-4", "run-5"]) },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(
        names().await? == ["run-4", "run-5"],
        "the running run stays: {:?}",
        names().await?
    );
    Ok(())
}

async fn recreated(ns: TestNamespace) -> Result<()> {
    let runs = ns.dynamic(&shipwright("BuildRun"));
    create_buildrun(&ns, "again", "app", json!({"ttlAfterSucceeded": "3s"})).await?;
    let finished = now_second();
    finish_buildrun(&ns, "again", true, finished).await?;
    runs.delete("again", &DeleteParams::default()).await?;
    eventually(Duration::from_secs(5), "the first one gone", || async {
        Ok(runs.get_opt("again").await?.is_none())
    })
    .await?;
    let second = create_buildrun(&ns, "again", "app", json!({"ttlAfterSucceeded": "3s"})).await?;
    sleep_until(finished + SignedDuration::from_secs(5)).await;
    let survivor = runs
        .get_opt("again")
        .await?
        .context("the re-created BuildRun was deleted")?;
    ensure!(survivor.uid() == second.uid());
    Ok(())
}

async fn keep(ns: TestNamespace) -> Result<()> {
    let runs = ns.dynamic(&shipwright("BuildRun"));
    create_buildrun(&ns, "precious", "app", json!({"ttlAfterSucceeded": "3s"})).await?;
    let finished = now_second();
    finish_buildrun(&ns, "precious", true, finished).await?;
    let keep = json!({"metadata": {"annotations": {"retention.dev/keep": "true"}}});
    runs.patch("precious", &PatchParams::default(), &Patch::Merge(&keep))
        .await?;
    sleep_until(finished + SignedDuration::from_millis(4500)).await;
    ensure!(
        runs.get_opt("precious").await?.is_some(),
        "a kept BuildRun was deleted"
    );
    Ok(())
}

/// Deletions of one Build's runs within the controller's Event window (5 s) share one Event on
/// the Build.
async fn events(ns: TestNamespace) -> Result<()> {
    let finished = now_second();
    for name in ["noted-1", "noted-2", "noted-3"] {
        create_buildrun(
            &ns,
            name,
            "parent-build",
            json!({"ttlAfterSucceeded": "1s"}),
        )
        .await?;
    }
    for name in ["noted-1", "noted-2", "noted-3"] {
        finish_buildrun(&ns, name, true, finished).await?;
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ns.env.client.clone(), &ns.name);
    let on_the_build = || async {
        let notes: Vec<String> = events
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|event| {
                event.regarding.as_ref().is_some_and(|regarding| {
                    regarding.kind.as_deref() == Some("Build")
                        && regarding.name.as_deref() == Some("parent-build")
                }) && event.reason.as_deref() == Some("RetentionExpired")
            })
            .filter_map(|event| event.note)
            .collect();
        Ok::<_, anyhow::Error>(notes)
    };
    // The TTL, the window, and the Event's own request.
    eventually(Duration::from_secs(20), "an Event on the Build", || async {
        Ok(!on_the_build().await?.is_empty())
    })
    .await?;
    let notes = on_the_build().await?;
    ensure!(
        notes
            == [
                "Deleted 3 BuildRuns of Build parent-build: their retention time passed: \
                 noted-1, noted-2, noted-3"
            ],
        "one Event for the three runs: {notes:?}"
    );
    Ok(())
}

/// The controller started with the webhook's ServiceAccount, which may not delete anything.
async fn missing_rbac(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let output =
        tokio::process::Command::new(cluster.layout.cargo_binary("kube-retention-controller"))
            .arg(format!("--metrics-address=127.0.0.1:{port}"))
            .arg("--kubeconfig")
            .arg(
                cluster.service_account_kubeconfig(
                    kube_retention_e2e::cluster::WEBHOOK_SERVICE_ACCOUNT,
                ),
            )
            .arg("--leader-election=false")
            .arg("--permissions-timeout=0s")
            .arg("--log-format=text")
            .output()
            .await?;
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    ensure!(
        !output.status.success(),
        "the controller must refuse to run: {text}"
    );
    for needed in [
        "missing RBAC permissions",
        "delete buildruns (shipwright.io) in all namespaces",
        "delete jobs (batch)",
    ] {
        ensure!(text.contains(needed), "{needed:?} missing from: {text}");
    }
    Ok(())
}
