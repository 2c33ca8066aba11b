//! `helm upgrade` from the chart of the previous commit (`KUBE_RETENTION_UPGRADE_FROM`, else
//! `HEAD~1`, read with `git archive`) to this one while 1,000 BuildRuns expire. The release first
//! goes to the previous chart with the image tagged `previous`; the upgrade then changes the
//! image's tag as a version bump would, so every pod is replaced. Every BuildRun is deleted, each
//! exactly once (the audit log), and a trickle of admission requests finds admission down for
//! no longer than the webhook's `timeoutSeconds` (3 s).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use jiff::{SignedDuration, Timestamp};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::{CONTROLLER_SERVICE_ACCOUNT, SHIPPED_NAMESPACE, ShippedImage};
use kube_retention_e2e::node::Node;
use libtest_mimic::Trial;
use serde_json::json;

use crate::support::{Env, TestNamespace, shipwright};
use crate::trickle::Trickle;
use crate::workloads::{create_buildrun, finish_buildrun, now_second};

const RUNS: usize = 1000;
/// The webhook's `timeoutSeconds` in the chart's values.
const ADMISSION_TIMEOUT: Duration = Duration::from_secs(3);

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "helm_upgrade_from_the_previous_chart_with_1000_objects_expiring_misses_and_doubles_none",
        upgrade,
    )]
}

async fn upgrade(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let from = std::env::var("KUBE_RETENTION_UPGRADE_FROM").unwrap_or_else(|_| "HEAD~1".into());
    let previous_chart = tempfile::tempdir()?;
    let archive = previous_chart.path().join("chart.tar");
    kube_retention_e2e::run(
        std::process::Command::new("git")
            .arg("-C")
            .arg(&cluster.layout.repo_root)
            .arg("archive")
            .arg(format!("--output={}", archive.display()))
            .args([&from, "charts/kube-retention"]),
    )
    .with_context(|| format!("reading the chart at {from}"))?;
    kube_retention_e2e::run(
        std::process::Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(previous_chart.path()),
    )?;
    let image = crate::shipped_image()?;
    let previous = ShippedImage {
        tag: "previous".into(),
        ..image.clone()
    };
    Node::tag_image(
        cluster,
        &format!("{}:{}", image.repository, image.tag),
        &format!("{}:{}", previous.repository, previous.tag),
    )?;
    cluster.helm_install(
        &previous_chart.path().join("charts/kube-retention"),
        &previous,
        &[],
    )?;

    // 1,000 BuildRuns, finished at once, expiring over the minute the upgrade takes.
    let finished = now_second();
    futures::stream::iter(0..RUNS)
        .map(|index| {
            let ns = &ns;
            async move {
                let name = format!("run-{index:04}");
                let ttl = format!("{}s", 60 + index % 60);
                create_buildrun(ns, &name, "app", json!({"ttlAfterSucceeded": ttl})).await?;
                finish_buildrun(ns, &name, true, finished).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;

    let trickle = Trickle::start(&ns)?;
    let chart = cluster.layout.repo_root.join("charts/kube-retention");
    cluster.helm_install(&chart, &image, &[])?;
    let last_expiry = finished + SignedDuration::from_secs(60 + 59);
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let deadline = last_expiry + SignedDuration::from_secs(30);
    let left = loop {
        let left = runs.list(&Default::default()).await?.items.len();
        if left == 0 || Timestamp::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let tally = trickle.stop();

    ensure!(left == 0, "{left} of {RUNS} BuildRuns never deleted");
    let user = LocalCluster::service_account_user_in(SHIPPED_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT);
    let deletes = crate::failover::successful_deletes(&ns, &user)?;
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for name in &deletes {
        *counts.entry(name).or_default() += 1;
    }
    let doubled: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
    ensure!(doubled.is_empty(), "deleted more than once: {doubled:?}");
    ensure!(
        counts.len() == RUNS,
        "{} deletions by the controller",
        counts.len()
    );
    let outage = longest_outage(&tally.failures);
    println!(
        "upgrade: {} admission requests answered, {} failed, longest outage {outage:?}",
        tally.answered,
        tally.failures.len()
    );
    ensure!(
        outage <= ADMISSION_TIMEOUT,
        "admission down for {outage:?}: failed {}",
        tally.summary()
    );
    Ok(())
}

/// The longest run of failures no more than a second apart, first to last (plus one trickle
/// interval).
fn longest_outage(failures: &[(Timestamp, String)]) -> Duration {
    let mut longest = Duration::ZERO;
    let mut start: Option<Timestamp> = None;
    let mut last: Option<Timestamp> = None;
    for (at, _) in failures {
        match (start, last) {
            (Some(_), Some(previous))
                if at.duration_since(previous) <= SignedDuration::from_secs(1) => {}
            _ => start = Some(*at),
        }
        last = Some(*at);
        if let Some(start) = start {
            let span = Duration::try_from(at.duration_since(start)).unwrap_or_default()
                + Duration::from_millis(200);
            longest = longest.max(span);
        }
    }
    longest
}
