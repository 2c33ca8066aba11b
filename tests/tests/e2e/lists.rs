//! Streamed lists' fallback against the real API server: with kube-apiserver's WatchList
//! feature gate off, it refuses `sendInitialEvents` (422 Invalid), and a controller started
//! against it lists in pages from the first refusal of each API and deletes what is due as it
//! does with streamed lists ([`kube_retention_io::initial_list`]). Streamed lists on the
//! usual cluster are counted by `after_sigkill_100_due_objects_go_within_5s_with_one_list_per_watch`.
//! This restarts the API server and the shared controller, so it runs with the disruptive
//! trials. Lists are counted from the audit log ([`lists`]), by how they were sent.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::audit_lists::{ListStart, list_start};
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::process::tracked;
use kube_retention_io::lean::LeanObject;
use libtest_mimic::Trial;
use serde_json::{Value, json};

use crate::audit;
use crate::kinds::openshift::short_build_finished;
use crate::lifecycle::create_jobs;
use crate::support::{Env, TestNamespace, openshift, restart_controller};
use crate::workloads::{bulky_job, eventually, finish_job, now_second};

pub fn disruptive_tests(env: &Env) -> Vec<Trial> {
    vec![
        env.trial(
            "with_streamed_lists_refused_the_controller_lists_in_pages_and_deletes_on_time",
            refused,
        ),
        env.trial(
            "a_namespace_of_heavy_jobs_listed_in_pages_is_read_a_bounded_page_at_a_time",
            heavy_pages,
        ),
        env.trial(
            "a_namespace_of_dense_jobs_is_listed_within_what_its_pages_and_objects_hold",
            dense_pages,
        ),
        env.trial(
            "a_custom_resource_nested_past_what_is_decoded_leaves_its_kind_listed",
            deep_resource,
        ),
    ]
}

/// Runs `trial` with the shared controller listing in pages (`--initial-list=pages`, as on
/// Kubernetes 1.33 or after a streamed list is cut), and restarts it as the suite runs it
/// after, whatever the trial came to.
async fn in_pages(cluster: &LocalCluster, trial: impl Future<Output = Result<()>>) -> Result<()> {
    let outcome = async {
        restart_controller(cluster, &["--initial-list=pages".to_owned()])?;
        trial.await
    }
    .await;
    let restored = restart_controller(cluster, &[]);
    outcome.and(restored)
}

/// The heavy Jobs a namespace editor makes, and what each weighs: 112 MB together, a page of
/// 500 if nothing bounded it.
const HEAVY: usize = 80;
const HEAVY_BYTES: usize = 1_400_000;
/// What the controller may hold in these trials: 128 MiB, within its own 192 MiB share of the
/// chart's memory limit (the evaluator's is apart), which also holds the bound on tracked
/// records that these trials come nowhere near.
const CONTROLLER_MIB: u64 = 128;

/// A namespace of heavy Jobs, listed in pages (as on Kubernetes 1.33, or after a streamed list
/// is cut): each page is read within `--list-page-memory` (4 MiB), asked for again smaller
/// where it weighs more ([`kube_retention_io::page_bytes`]), so the controller stays within its
/// share of the chart's limit and deletes what is due as ever.
async fn heavy_pages(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    // Under a TTL an hour off, so watched and kept.
    let kept = json!({"retention.dev/ttl-after-finished": "1h"});
    for index in 0..HEAVY {
        let name = format!("heavy-{index:03}");
        bulky_job(&ns, &name, json!({}), kept.clone(), HEAVY_BYTES).await?;
    }
    in_pages(&cluster, async {
        due_jobs_go_and_the_rest_stay(&ns, HEAVY, "heavy").await?;
        let series = r#"kube_retention_list_pages_read_again_total{api="/apis/batch"}"#;
        let read_again = components::counter(cluster.controller_port, series)?;
        let peak = tracked(&cluster.layout.state_dir, &[CONTROLLER])
            .remove(0)
            .peak_rss_kib()
            .context("the controller's peak memory")?;
        ensure!(
            read_again >= 1 && peak < CONTROLLER_MIB * 1024,
            "listing {HEAVY} Jobs of {HEAVY_BYTES} bytes in pages, the controller peaked at \
             {peak} KiB (held to {CONTROLLER_MIB} MiB here), and {series} \
             is {read_again} (a page past its bound is read again smaller)"
        );
        println!(
            "{HEAVY} Jobs of {HEAVY_BYTES} bytes listed in pages: {read_again} pages read again \
             smaller, the controller peaked at {} MiB",
            peak / 1024
        );
        Ok(())
    })
    .await
}

/// Dense Jobs a namespace editor makes: their `env`, one-entry maps that hold some 950 bytes
/// decoded for 17 of text. `DENSE` of `DENSE_ENTRIES` hold some 11 MB each decoded (200 KB of
/// text), a page of them 220 MB; `PAST` of `PAST_ENTRIES` hold some 19 MB each, past what the
/// controller decodes of one object (`kube_retention_io::lean::OBJECT_BYTES`).
const DENSE: usize = 20;
const DENSE_ENTRIES: usize = 12_000;
const PAST: usize = 6;
const PAST_ENTRIES: usize = 20_000;

/// A Job of `entries` one-entry maps in its container's `env`.
async fn dense_job(
    ns: &TestNamespace,
    name: &str,
    annotations: Value,
    entries: usize,
) -> Result<()> {
    let environment: Vec<Value> = (0..entries)
        .map(|index| json!({"name": format!("E{index}")}))
        .collect();
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "env": environment}]}}}}))?;
    Api::<Job>::namespaced(ns.env.client.clone(), &ns.name)
        .create(&PostParams::default(), &job)
        .await?;
    Ok(())
}

/// A namespace of dense Jobs, listed in pages: each page is read within what its objects hold
/// decoded (four times `--list-page-memory`), asked for again smaller where they hold more, and
/// each object's data is decoded within its bound: an object past it is not judged, so a
/// finished, due Job past it is kept (`kube_retention_objects_past_bound_total`), while the
/// namespace's other due Jobs go as ever and the controller stays within its share.
async fn dense_pages(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let kept = json!({"retention.dev/ttl-after-finished": "1h"});
    for index in 0..DENSE {
        dense_job(
            &ns,
            &format!("dense-{index:03}"),
            kept.clone(),
            DENSE_ENTRIES,
        )
        .await?;
    }
    let due = json!({"retention.dev/ttl-after-finished": "2s"});
    let finished = now_second();
    for index in 0..PAST {
        let name = format!("past-{index:03}");
        dense_job(&ns, &name, due.clone(), PAST_ENTRIES).await?;
        finish_job(&ns.env.client, &ns.name, &name, true, finished).await?;
    }
    in_pages(&cluster, async {
        due_jobs_go_and_the_rest_stay(&ns, DENSE + PAST, "dense").await?;
        let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
        // Past its bound and due: still there, its deadline long gone.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let left = jobs.list(&Default::default()).await?.items;
        let past = left
            .iter()
            .filter(|job| job.name_any().starts_with("past-"))
            .count();
        ensure!(
            past == PAST,
            "{past} of the {PAST} due Jobs past the bound are left"
        );
        let read_again = components::counter(
            cluster.controller_port,
            r#"kube_retention_list_pages_read_again_total{api="/apis/batch"}"#,
        )?;
        let past_bound = components::counter(
            cluster.controller_port,
            r#"kube_retention_objects_past_bound_total{kind="Job.batch"}"#,
        )?;
        let peak = tracked(&cluster.layout.state_dir, &[CONTROLLER])
            .remove(0)
            .peak_rss_kib()
            .context("the controller's peak memory")?;
        ensure!(
            read_again >= 1 && past_bound >= PAST as u64 && peak < CONTROLLER_MIB * 1024,
            "listing {DENSE} Jobs of {DENSE_ENTRIES} one-entry maps and {PAST} of \
             {PAST_ENTRIES} in pages, the controller peaked at {peak} KiB (held to \
             {CONTROLLER_MIB} MiB here); {read_again} pages were read again \
             smaller, {past_bound} objects were past the bound"
        );
        println!(
            "{DENSE} Jobs of {DENSE_ENTRIES} one-entry maps and {PAST} of {PAST_ENTRIES} listed \
             in pages: {read_again} pages read again smaller, {past_bound} objects past the \
             bound, the controller peaked at {} MiB",
            peak / 1024
        );
        Ok(())
    })
    .await
}

/// How deep a namespace editor nests a Build's free-form spec: the API server accepts it
/// (10,000 deep), serde_json alone decodes 128.
const DEEP: usize = 300;

/// A Build whose spec nests [`DEEP`] deep, beside a Build due two seconds after it finishes,
/// listed in pages: a page with it was once an error, so every list of Builds failed, for
/// every namespace, and nothing of the kind was deleted. It is now read as its metadata alone,
/// not judged (`kube_retention_objects_past_bound_total`), and the due Build goes.
async fn deep_resource(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let deep = (0..DEEP).fold(json!(1), |inner, _| json!({"a": inner}));
    let build = json!({"apiVersion": "build.openshift.io/v1", "kind": "Build",
                       "metadata": {"name": "deep", "namespace": ns.name,
                                    "annotations": {"retention.dev/ttl-after-finished": "1s"}},
                       "spec": {"nested": deep}});
    // Sent as text: kube's own decoding of the answer would stop at 128 deep.
    let request = http::Request::post(format!(
        "/apis/build.openshift.io/v1/namespaces/{}/builds",
        ns.name
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&build)?)?;
    ns.env.client.request_text(request).await?;
    in_pages(&cluster, async {
        short_build_finished(&ns).await?;
        let builds = ns.dynamic(&openshift("Build"));
        eventually(Duration::from_secs(30), "the due Build deleted", || async {
            Ok(builds.get_opt("short").await?.is_none())
        })
        .await?;
        let past_bound = components::counter(
            cluster.controller_port,
            r#"kube_retention_objects_past_bound_total{kind="Build.build.openshift.io"}"#,
        )?;
        // Read as the controller reads them: kube's own decoding stops at 128 deep.
        let lean: Api<LeanObject> =
            Api::namespaced_with(ns.env.client.clone(), &ns.name, &openshift("Build"));
        let names: Vec<String> = lean
            .list(&Default::default())
            .await?
            .items
            .iter()
            .map(|LeanObject(build)| build.name_any())
            .collect();
        ensure!(
            past_bound >= 1 && names == ["deep"],
            "with a Build nested {DEEP} deep listed in pages: {past_bound} objects past the \
             bound, Builds left {names:?}"
        );
        Ok(())
    })
    .await
}

async fn refused(ns: TestNamespace) -> Result<()> {
    let cluster = ns.env.cluster.clone();
    let controller = tracked(&cluster.layout.state_dir, &[CONTROLLER]).remove(0);
    controller.kill()?;
    let gated = cluster.clone();
    let outcome = async {
        tokio::task::spawn_blocking(move || {
            gated.restart_apiserver_with_feature_gates("WatchList=false")
        })
        .await??;
        let started_at = Timestamp::now();
        components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
        components::wait_for_controller(
            &cluster,
            cluster.controller_port,
            Duration::from_secs(30),
        )?;
        let finished = due_jobs_finished(&ns, 20).await?;
        let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
        eventually(
            Duration::from_secs(10),
            "all 20 due Jobs deleted, listed in pages",
            || async { Ok(jobs.list(&Default::default()).await?.items.is_empty()) },
        )
        .await?;
        let gone = Timestamp::now();
        ensure!(
            gone <= finished + SignedDuration::from_secs(5),
            "the last due Job went at {gone}, its TTL ended at {}",
            finished + SignedDuration::from_secs(2)
        );
        let user = LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT);
        let listed = lists(&ns, &user, "batch", "jobs", started_at)?;
        // The first refusal sends every later list of its API to pages; watches started
        // before it (Jobs have two, listing side by side) may each be refused once.
        ensure!(
            listed.refused <= 2 && listed.streamed == 0 && listed.paged == 2,
            "Jobs' lists with streamed lists refused: {listed:?}"
        );
        let refused = refused_streams(&ns, &user, started_at, None)?;
        ensure!(refused >= 1, "no streamed list was refused");
        // The controller counts each refusal by API: those of batch are of Jobs and CronJobs.
        let batch = refused_streams(&ns, &user, started_at, Some("batch"))?;
        let series = r#"kube_retention_list_fallbacks_total{api="/apis/batch",reason="refused"}"#;
        let counted = components::counter(cluster.controller_port, series)?;
        ensure!(
            counted >= 1 && usize::try_from(counted) == Ok(batch),
            "{series} is {counted}, for {batch} streamed lists of batch refused"
        );
        println!("with WatchList off: Jobs {listed:?}; streamed lists refused {refused}");
        Ok::<(), anyhow::Error>(())
    }
    .await;
    // Back to the usual API server, and a controller that streams again.
    let usual = cluster.clone();
    tokio::task::spawn_blocking(move || usual.restart_apiserver(false)).await??;
    if let Some(running) = tracked(&cluster.layout.state_dir, &[CONTROLLER]).first()
        && running.live_pid().is_some()
    {
        running.kill()?;
    }
    components::start_controller(&cluster, CONTROLLER, cluster.controller_port, &[])?;
    components::wait_for_controller(&cluster, cluster.controller_port, Duration::from_secs(30))?;
    let settling = cluster.clone();
    tokio::task::spawn_blocking(move || {
        settling.wait_until_controllers_act(Duration::from_secs(120))
    })
    .await??;
    outcome
}

/// Five Jobs due 2 s after they finish, finished now; then, within 60 s, those deleted and the
/// namespace's `kept` others (`what` they are) all left.
async fn due_jobs_go_and_the_rest_stay(ns: &TestNamespace, kept: usize, what: &str) -> Result<()> {
    due_jobs_finished(ns, 5).await?;
    let jobs: Api<Job> = Api::namespaced(ns.env.client.clone(), &ns.name);
    let waited =
        format!("the due Jobs deleted once the {what} ones were listed, and none of those");
    eventually(Duration::from_secs(60), &waited, || async {
        let left = jobs.list(&Default::default()).await?.items;
        Ok(left.len() == kept && left.iter().all(|job| !job.name_any().starts_with("due-")))
    })
    .await
}

/// `count` Jobs finished now, due 2 s after: the second they finished.
async fn due_jobs_finished(ns: &TestNamespace, count: usize) -> Result<Timestamp> {
    let due = create_jobs(
        ns,
        "due",
        count,
        json!({"retention.dev/ttl-after-finished": "2s"}),
    )
    .await?;
    let finished = now_second();
    for name in &due {
        finish_job(&ns.env.client, &ns.name, name, true, finished).await?;
    }
    Ok(finished)
}

/// The lists of `resource` by `user` received at or after `since`, by how they were sent.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lists {
    /// Paged: first pages only (a list of many objects takes several).
    pub paged: usize,
    /// Streamed: watches with `sendInitialEvents`, counted when the API server starts answering
    /// (a watch completes only when it ends).
    pub streamed: usize,
    /// Streamed lists the API server refused.
    pub refused: usize,
}

impl Lists {
    /// The lists that were answered, paged or streamed.
    pub fn total(&self) -> usize {
        self.paged + self.streamed
    }
}

/// How often `user` listed `resource` of API `group` ("" for the core group), anywhere, since
/// `since`, paged or streamed.
pub fn lists(
    ns: &TestNamespace,
    user: &str,
    group: &str,
    resource: &str,
    since: Timestamp,
) -> Result<Lists> {
    let mut lists = Lists::default();
    for event in audit::since(ns, user, since)?.iter().filter(|event| {
        event["objectRef"]["resource"] == resource
            && event["objectRef"]["apiGroup"].as_str().unwrap_or_default() == group
    }) {
        match list_start(event) {
            Some(ListStart::Paged) => lists.paged += 1,
            Some(ListStart::Streamed) => lists.streamed += 1,
            Some(ListStart::Refused) => lists.refused += 1,
            None => {}
        }
    }
    Ok(lists)
}

/// How many streamed lists the API server refused `user` since `since`, of API group `group`
/// ("" for the core group) or of any.
pub fn refused_streams(
    ns: &TestNamespace,
    user: &str,
    since: Timestamp,
    group: Option<&str>,
) -> Result<usize> {
    Ok(audit::since(ns, user, since)?
        .iter()
        .filter(|event| {
            group.is_none_or(|group| {
                event["objectRef"]["apiGroup"].as_str().unwrap_or_default() == group
            })
        })
        .filter(|event| list_start(event) == Some(ListStart::Refused))
        .count())
}
