//! `helm test`: the chart's test Pod runs `kubectl retention selftest` from the shipped image, as
//! its own ServiceAccount, in a namespace the chart's hooks make for it: the webhook refuses an
//! invalid RetentionPolicy, stamps a ConfigMap given a 2 s time to live, and the controller
//! deletes it. Everything the test made is gone after it.

use anyhow::{Context, Result, ensure};
use kube_retention_e2e::cluster::{CHART_RELEASE, SHIPPED_NAMESPACE};
use libtest_mimic::Trial;

use crate::support::{Env, TestNamespace};

pub fn tests(env: &Env) -> Vec<Trial> {
    vec![env.trial(
        "helm_test_proves_admission_and_deletion_from_the_shipped_image",
        helm_test,
    )]
}

async fn helm_test(ns: TestNamespace) -> Result<()> {
    let cluster = &ns.env.cluster;
    let said = kube_retention_e2e::run(
        cluster
            .helm()
            .args(["test", CHART_RELEASE, "--namespace", SHIPPED_NAMESPACE])
            .args(["--timeout", "3m"]),
    )
    .context("helm test")?;
    ensure!(
        said.contains("TEST SUITE:     kube-retention-selftest")
            && said.contains("Phase:          Succeeded"),
        "{said}"
    );
    // Succeeded, its objects are gone (hook-succeeded), so a later uninstall leaves nothing.
    let tested_in = format!("{SHIPPED_NAMESPACE}-selftest");
    for (kind, namespace) in [
        ("pod", SHIPPED_NAMESPACE),
        ("serviceaccount", SHIPPED_NAMESPACE),
        ("role", tested_in.as_str()),
        ("rolebinding", tested_in.as_str()),
    ] {
        let left = kube_retention_e2e::run(cluster.kubectl().args([
            "get",
            kind,
            "kube-retention-selftest",
            "--namespace",
            namespace,
            "--ignore-not-found",
            "-o",
            "name",
        ]))?;
        ensure!(left.trim().is_empty(), "left after helm test: {left}");
    }
    // Its namespace is gone, or going.
    let namespace = kube_retention_e2e::run(cluster.kubectl().args([
        "get",
        "namespace",
        &tested_in,
        "--ignore-not-found",
        "-o",
        "jsonpath={.metadata.name} {.metadata.deletionTimestamp}",
    ]))?;
    // Nothing printed: gone; a name and a deletion timestamp: going.
    let gone_or_going = namespace.split_whitespace().count() != 1;
    ensure!(
        gone_or_going,
        "namespace {tested_in} is left after helm test: {namespace}"
    );
    Ok(())
}
