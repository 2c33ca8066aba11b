//! `kubectl retention` found by the real kubectl on PATH, and the embeddable prune library's
//! example operator, against the real cluster: [`explain`] and `upcoming` agree with the
//! controller; a prune's dry run names exactly what the prune then deletes (the newest N kept,
//! running and kept Jobs untouched), which it announces to a deletion-ledger sink (the dry run
//! announces nothing); the example's hook vetoes; and kubectl's connection flags and `-o`
//! work as kubectl's do ([`connection`]).

use std::collections::BTreeSet;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::PostParams;
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::support::{Env, TestNamespace};
use crate::workloads::{finish_job, now_second};

mod connection;
mod explain;

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "kubectl_retention_explain_and_upcoming_give_the_controllers_deadlines_and_sources",
            explain::explain_and_upcoming,
        ),
        env.trial(
            "kubectl_retention_prune_dry_run_names_exactly_what_prune_then_deletes",
            prune,
        ),
        env.trial(
            "the_prune_library_example_operator_keeps_the_newest_and_honours_its_veto",
            example_operator,
        ),
        env.trial(
            "kubectl_retention_takes_kubectls_context_and_as_flags_and_says_what_it_did_as_json",
            connection::connection_flags,
        ),
        env.trial(
            "kubectl_retention_selftest_proves_admission_and_deletion_here",
            connection::selftest,
        ),
    ]
}

/// kubectl with the workspace's binaries (kubectl-retention) first on PATH; the kubeconfig in
/// the environment, as kubectl passes no flags before a plugin's name on to it.
pub fn kubectl(ns: &TestNamespace) -> Command {
    let layout = &ns.env.cluster.layout;
    let plugins = layout.cargo_binary("kubectl-retention");
    let mut path =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    path.insert(
        0,
        plugins
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
    );
    let mut command = Command::new(layout.binary("kubectl"));
    command.env("KUBECONFIG", layout.kubeconfig());
    command.env("PATH", std::env::join_paths(path).unwrap_or_default());
    command
}

/// A Job labelled `labels` that finished `minutes_ago` (or runs, for `None`).
pub async fn job(
    ns: &TestNamespace,
    name: &str,
    labels: Value,
    annotations: Value,
    minutes_ago: Option<i64>,
) -> Result<()> {
    let finished = minutes_ago.map(|minutes| now_second() - SignedDuration::from_mins(minutes));
    job_finished_at(ns, name, labels, annotations, finished).await
}

/// A Job labelled `labels` that finished at `finished` (or runs, for `None`): for a test that
/// knows the second, where reading the clock again could cross into the next.
pub async fn job_finished_at(
    ns: &TestNamespace,
    name: &str,
    labels: Value,
    annotations: Value,
    finished: Option<Timestamp>,
) -> Result<()> {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}))?;
    Api::<Job>::namespaced(ns.env.client.clone(), &ns.name)
        .create(&PostParams::default(), &job)
        .await?;
    if let Some(at) = finished {
        finish_job(&ns.env.client, &ns.name, name, true, at).await?;
    }
    Ok(())
}

async fn names(ns: &TestNamespace) -> Result<BTreeSet<String>> {
    let jobs = Api::<Job>::namespaced(ns.env.client.clone(), &ns.name)
        .list(&Default::default())
        .await?;
    Ok(jobs
        .items
        .into_iter()
        .filter_map(|job| job.metadata.name)
        .collect())
}

fn pruned_names(plan: &Value) -> BTreeSet<String> {
    plan["plan"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|object| {
            ["limits", "newestFinished", "maxAge", "custom"]
                .contains(&object["decision"].as_str().unwrap_or_default())
        })
        .filter_map(|object| object["name"].as_str().map(str::to_owned))
        .collect()
}

async fn prune(ns: TestNamespace) -> Result<()> {
    let nightly = json!({"app": "nightly"});
    for (index, minutes) in [50, 40, 30, 20, 10].into_iter().enumerate() {
        job(
            &ns,
            &format!("nightly-{index}"),
            nightly.clone(),
            json!({}),
            Some(minutes),
        )
        .await?;
    }
    job(&ns, "nightly-running", nightly.clone(), json!({}), None).await?;
    job(
        &ns,
        "nightly-kept",
        nightly,
        json!({"retention.dev/keep": "true"}),
        Some(90),
    )
    .await?;
    job(
        &ns,
        "weekly-0",
        json!({"app": "weekly"}),
        json!({}),
        Some(90),
    )
    .await?;
    // The real prune announces its deletions to a deletion-ledger sink.
    let ledger = crate::cleaners::sink::Sink::start().await?;
    let prune = |dry_run: bool| -> Result<Value> {
        let mut command = kubectl(&ns);
        command.args([
            "retention",
            "prune",
            "jobs",
            "-n",
            &ns.name,
            "-l",
            "app=nightly",
            "--max-count",
            "2",
            "-o",
            "json",
        ]);
        if dry_run {
            command.arg("--dry-run");
        }
        command.args(["--ledger-sink", &ledger.url]);
        Ok(serde_json::from_str(&kube_retention_e2e::run(
            &mut command,
        )?)?)
    };
    let planned = prune(true)?;
    let expected: BTreeSet<String> = ["nightly-0", "nightly-1", "nightly-2"]
        .map(str::to_owned)
        .into();
    ensure!(
        pruned_names(&planned) == expected,
        "the dry run planned {planned}"
    );
    ensure!(
        names(&ns).await?.len() == 8,
        "the dry run deleted something"
    );
    let table = kube_retention_e2e::run(kubectl(&ns).args([
        "retention",
        "prune",
        "job",
        "-n",
        &ns.name,
        "-l",
        "app=nightly",
        "--max-count",
        "2",
        "--dry-run",
    ]))?;
    ensure!(
        table.starts_with("NAMESPACE")
            && table.contains("would prune (beyond the newest 2 finished)")
            && table.contains("3 would prune, 4 kept"),
        "the table: {table}"
    );
    let done = prune(false)?;
    let deleted: BTreeSet<String> = done["deleted"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|name| name.as_str()?.rsplit('/').next().map(str::to_owned))
        .collect();
    ensure!(deleted == expected, "pruned {done}, planned {expected:?}");
    let received = ledger.received();
    ensure!(
        received.len() == expected.len(),
        "{} announcements for {} deletions (the dry run announces none)",
        received.len(),
        expected.len()
    );
    let announced: BTreeSet<String> = received
        .into_iter()
        .filter(|received| {
            received.headers.get("ce-type").map(String::as_str) == Some("dev.retention.deleted")
                && received.body["reason"] == "prune"
        })
        .filter_map(|received| received.body["name"].as_str().map(str::to_owned))
        .collect();
    ensure!(
        announced == expected,
        "the ledger was told of {announced:?}, the prune deleted {expected:?}"
    );
    let left: BTreeSet<String> = [
        "nightly-3",
        "nightly-4",
        "nightly-running",
        "nightly-kept",
        "weekly-0",
    ]
    .map(str::to_owned)
    .into();
    ensure!(names(&ns).await? == left, "left: {:?}", names(&ns).await?);
    let refused = kube_retention_e2e::output_with_input(
        kubectl(&ns).args(["retention", "prune", "jobs", "-n", &ns.name]),
        "",
    )?;
    let said = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        !refused.status.success() && said.contains("--max-count"),
        "no strategy must be refused: {said}"
    );
    Ok(())
}

async fn example_operator(ns: TestNamespace) -> Result<()> {
    let batch = json!({"app": "batch"});
    job(
        &ns,
        "batch-held",
        json!({"app": "batch", "audit": "hold"}),
        json!({}),
        Some(30),
    )
    .await?;
    job(&ns, "batch-old", batch.clone(), json!({}), Some(20)).await?;
    job(&ns, "batch-new", batch, json!({}), Some(10)).await?;
    let layout = &ns.env.cluster.layout;
    let example = layout.cargo_binary("examples/operator");
    let output = kube_retention_e2e::run(
        Command::new(&example)
            .args([
                "--once",
                "--namespace",
                &ns.name,
                "--selector",
                "app=batch",
                "--keep",
                "1",
                "--kubeconfig",
            ])
            .arg(layout.kubeconfig()),
    )
    .with_context(|| format!("{} (built by make build)", example.display()))?;
    let pruned: Value = serde_json::from_str(&output)?;
    ensure!(
        pruned["deleted"] == json!([format!("{}/batch-old", ns.name)]),
        "the example pruned {pruned}"
    );
    let vetoed = pruned["plan"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|object| object["name"] == "batch-held" && object["reason"] == "held for audit");
    ensure!(vetoed, "the hook's veto is in the plan: {pruned}");
    let left: BTreeSet<String> = ["batch-held", "batch-new"].map(str::to_owned).into();
    ensure!(names(&ns).await? == left, "left: {:?}", names(&ns).await?);
    Ok(())
}
