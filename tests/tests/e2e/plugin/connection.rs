//! `kubectl retention` takes kubectl's connection flags as kubectl does: `--context` picks a
//! kubeconfig's context over its current one, `--as` and `--as-group` make the API server judge
//! each request as that user, and `-o` gives what a command did as JSON or YAML. Its completion
//! script is valid bash; `selftest` passes on a working install.

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::support::TestNamespace;

/// The breaker's ConfigMap, as `breaker status -o json` names it.
const BREAKER: &str = "kube-retention/kube-retention-controller-circuit-breaker";

pub async fn connection_flags(ns: TestNamespace) -> Result<()> {
    let layout = &ns.env.cluster.layout;
    let kubeconfig: Value = serde_norway::from_str(&std::fs::read_to_string(layout.kubeconfig())?)?;
    let admin = kubeconfig["current-context"]
        .as_str()
        .context("the cluster's kubeconfig has a current-context")?
        .to_owned();
    // A second context, current, for a cluster nothing listens for.
    let mut elsewhere = kubeconfig.clone();
    let user = kubeconfig["contexts"][0]["context"]["user"].clone();
    elsewhere["clusters"]
        .as_array_mut()
        .context("clusters")?
        .push(serde_json::json!({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}));
    elsewhere["contexts"]
        .as_array_mut()
        .context("contexts")?
        .push(serde_json::json!({"name": "elsewhere", "context": {"cluster": "nowhere", "user": user}}));
    elsewhere["current-context"] = "elsewhere".into();
    let path = std::env::temp_dir().join(format!("{}-kubeconfig", ns.name));
    std::fs::write(&path, serde_norway::to_string(&elsewhere)?)?;
    let retention = |args: &[&str]| {
        let mut command = super::kubectl(&ns);
        command
            .arg("retention")
            .arg("--kubeconfig")
            .arg(&path)
            .args(args);
        kube_retention_e2e::outcome_with_input(&mut command, "")
    };
    let outcome = async {
        let (ok, said) = retention(&["breaker", "status"])?;
        ensure!(
            !ok && said.contains("127.0.0.1:1"),
            "the current context's cluster: {said}"
        );
        let (ok, said) = retention(&["--context", &admin, "breaker", "status", "-o", "json"])?;
        ensure!(ok, "{said}");
        let state: Value = serde_json::from_str(&said).with_context(|| said.clone())?;
        ensure!(
            state["configMap"] == BREAKER && state["open"] == false && state["released"] == false,
            "{state}"
        );
        let (ok, said) = retention(&["--context", &admin, "--as", "jane", "breaker", "status"])?;
        ensure!(
            !ok && said.contains("User \"jane\" cannot get resource \"configmaps\""),
            "judged as jane: {said}"
        );
        let (ok, said) = retention(&[
            "--context",
            &admin,
            "--as",
            "jane",
            "--as-group",
            "system:masters",
            "breaker",
            "status",
            "-o",
            "yaml",
        ])?;
        ensure!(
            ok && said.contains("open: false"),
            "jane in system:masters: {said}"
        );
        let (ok, script) = retention(&["completion", "bash"])?;
        ensure!(ok && script.contains("breaker"), "{script}");
        let (valid, said) = kube_retention_e2e::outcome_with_input(
            std::process::Command::new("bash").arg("-n"),
            &script,
        )?;
        ensure!(valid, "bash -n: {said}");
        Ok(())
    }
    .await;
    std::fs::remove_file(&path).ok();
    outcome
}

/// `kubectl retention selftest` on a working install: the invalid policy refused naming its
/// field, the ConfigMap stamped and deleted once expired, said as JSON.
pub async fn selftest(ns: TestNamespace) -> Result<()> {
    let mut command = super::kubectl(&ns);
    command.args([
        "retention",
        "selftest",
        "--namespace",
        &ns.name,
        "-o",
        "json",
    ]);
    let said = kube_retention_e2e::run(&mut command)?;
    let report: Value = serde_json::from_str(&said).with_context(|| said.clone())?;
    ensure!(
        report["namespace"] == ns.name.as_str()
            && report["refused"]
                .as_str()
                .is_some_and(|refused| refused.contains("spec.match"))
            && report["expiresAt"]
                .as_str()
                .is_some_and(|stamp| !stamp.is_empty())
            && report["deletedAfterSeconds"]
                .as_f64()
                .is_some_and(|after| after < 60.0),
        "{report}"
    );
    Ok(())
}
