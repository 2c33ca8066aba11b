//! Settings a run takes from its parent at admission: Shipwright BuildRuns inheriting their
//! Build's TTLs (or owned by it with `atBuildDeletion`), and OpenShift-style Builds their
//! BuildConfig's defaults.

use anyhow::{Result, bail, ensure};
use kube::api::{PostParams, ResourceExt};
use serde_json::json;

use super::{apply, build_yaml, expect_denied};
use crate::support::{TestNamespace, object, openshift, shipwright};

fn buildrun_yaml(name: &str, build: &str, retention: Option<&str>) -> String {
    let retention = retention
        .map(|r| format!("\n  retention: {r}"))
        .unwrap_or_default();
    format!(
        "apiVersion: shipwright.io/v1beta1\nkind: BuildRun\nmetadata:\n  name: {name}\nspec:\n  \
         build: {{name: {build}}}{retention}\n"
    )
}

pub(super) async fn buildruns(ns: TestNamespace) -> Result<()> {
    let (ok, text) = apply(
        &ns,
        &build_yaml("parent", "{ttlAfterSucceeded: 1.5h, ttlAfterFailed: 36h}"),
        &[],
    )?;
    ensure!(ok, "{text}");
    let (ok, text) = apply(&ns, &buildrun_yaml("inherits", "parent", None), &[])?;
    ensure!(ok, "{text}");
    let (ok, text) = apply(
        &ns,
        &buildrun_yaml("own", "parent", Some("{ttlAfterFailed: 5m}")),
        &[],
    )?;
    ensure!(ok, "{text}");
    let runs = ns.dynamic(&shipwright("BuildRun"));
    let inherits = runs.get("inherits").await?;
    ensure!(
        inherits.data["spec"]["retention"]
            == json!({"ttlAfterSucceeded": "1.5h", "ttlAfterFailed": "36h"}),
        "{:?}",
        inherits.data["spec"]
    );
    let own = runs.get("own").await?;
    ensure!(
        own.data["spec"]["retention"]
            == json!({"ttlAfterSucceeded": "1.5h", "ttlAfterFailed": "5m"}),
        "{:?}",
        own.data["spec"]
    );

    // Editing the Build later leaves existing runs alone.
    let (ok, text) = apply(
        &ns,
        &build_yaml("parent", "{ttlAfterSucceeded: 10m, ttlAfterFailed: 10m}"),
        &[],
    )?;
    ensure!(ok, "{text}");
    let inherits = runs.get("inherits").await?;
    ensure!(inherits.data["spec"]["retention"]["ttlAfterSucceeded"] == "1.5h");

    // A run of a Build that does not exist is admitted unchanged, with a warning.
    let (ok, text) = apply(&ns, &buildrun_yaml("orphan", "nobody", None), &[])?;
    ensure!(ok && text.contains("Build \"nobody\" not found"), "{text}");
    ensure!(
        runs.get("orphan").await?.data["spec"]
            .get("retention")
            .is_none()
    );
    Ok(())
}

pub(super) async fn bad_buildrun(ns: TestNamespace) -> Result<()> {
    let yaml = buildrun_yaml("bad-run", "whatever", Some("{ttlAfterSucceeded: 1w}"));
    expect_denied(
        &ns,
        &yaml,
        &[],
        &["spec.retention.ttlAfterSucceeded", "\"1w\""],
    )
}

pub(super) async fn at_build_deletion(ns: TestNamespace) -> Result<()> {
    let (ok, text) = apply(
        &ns,
        &build_yaml("owner", "{atBuildDeletion: true, ttlAfterFailed: 1h}"),
        &[],
    )?;
    ensure!(ok, "{text}");
    let (ok, text) = apply(&ns, &buildrun_yaml("owned", "owner", None), &[])?;
    ensure!(ok, "{text}");
    let build = ns.dynamic(&shipwright("Build")).get("owner").await?;
    let run = ns.dynamic(&shipwright("BuildRun")).get("owned").await?;
    let owners = run.owner_references();
    ensure!(
        owners.len() == 1
            && owners[0].kind == "Build"
            && Some(&owners[0].uid) == build.metadata.uid.as_ref(),
        "{owners:?}"
    );
    Ok(())
}

pub(super) async fn openshift_builds(ns: TestNamespace) -> Result<()> {
    let configs = ns.dynamic(&openshift("BuildConfig"));
    let config = object(
        &openshift("BuildConfig"),
        json!({"metadata": {"name": "app"}, "spec": {
            "defaultSuccessfulBuildTTLSeconds": 600, "defaultFailedBuildTTLSeconds": 3600,
            "successfulBuildsHistoryLimit": 5}}),
    )?;
    configs.create(&PostParams::default(), &config).await?;
    let builds = ns.dynamic(&openshift("Build"));
    let build = object(
        &openshift("Build"),
        json!({"metadata": {"name": "app-1", "annotations": {"openshift.io/build-config.name": "app"}},
               "spec": {"failedBuildTTLSeconds": 60}}),
    )?;
    let created = builds.create(&PostParams::default(), &build).await?;
    ensure!(
        created.data["spec"]["successfulBuildTTLSeconds"] == 600,
        "{:?}",
        created.data
    );
    ensure!(
        created.data["spec"]["failedBuildTTLSeconds"] == 60,
        "{:?}",
        created.data
    );

    let bad = object(
        &openshift("BuildConfig"),
        json!({"metadata": {"name": "bad"}, "spec": {"failedBuildsHistoryLimit": 101}}),
    )?;
    match configs.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status))
            if status
                .message
                .contains("spec.failedBuildsHistoryLimit: 101") =>
        {
            Ok(())
        }
        other => bail!("a history limit of 101 must be denied, got {other:?}"),
    }
}
