//! Test infrastructure for kube-retention: a real local Kubernetes control plane built from
//! Kubernetes' own Go modules (`tests/cluster`), started in a state folder of its own, with the
//! project's manifests installed and kubeconfigs for the project's ServiceAccounts.
//!
//! `make up` / `make down` drive it through the `local-cluster` binary; the end-to-end suite in
//! `tests/e2e` starts a private cluster with it.

pub mod admission_config;
pub mod audit_lists;
pub mod cluster;
pub mod components;
pub mod control_plane;
pub mod feature_gates;
pub mod kubeconfig;
pub mod layout;
pub mod node;
pub mod pki;
pub mod process;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

pub use cluster::{LocalCluster, Outcome};
pub use layout::Layout;

/// kube-retention's own processes, started after the control plane.
pub const COMPONENTS: [&str; 5] = [
    components::WEBHOOK,
    components::SECOND_WEBHOOK,
    components::VERIFYING_WEBHOOK,
    components::CONTROLLER,
    components::SECOND_CONTROLLER,
];

/// Runs `command` to completion and returns its standard output; a failure carries the command
/// line and its standard error.
pub fn run(command: &mut Command) -> Result<String> {
    let output = command.output()?;
    checked(command, output)
}

/// Like [`run`], with `input` on the command's standard input.
pub fn run_with_input(command: &mut Command, input: &str) -> Result<String> {
    let output = output_with_input(command, input)?;
    checked(command, output)
}

/// Runs `command` with `input` on its standard input: whether it succeeded, and all it printed
/// (its standard output, then its standard error).
pub fn outcome_with_input(command: &mut Command, input: &str) -> Result<(bool, String)> {
    let output = output_with_input(command, input)?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), said))
}

/// Runs `command` with `input` on its standard input and collects what it printed, whether it
/// succeeded or not.
pub fn output_with_input(command: &mut Command, input: &str) -> Result<Output> {
    use std::io::Write;
    use std::process::Stdio;

    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?
        .write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

fn checked(command: &Command, output: Output) -> Result<String> {
    if !output.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            command,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// Calls `attempt` until it succeeds or `timeout` passes; the last error is returned.
pub fn retry<T>(timeout: Duration, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(error) if Instant::now() > deadline => return Err(error),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
