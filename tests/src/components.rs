//! kube-retention's own processes on the local cluster: each runs as a local process with the
//! kubeconfig of its ServiceAccount (the RBAC `deploy/` grants, never admin).

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::cluster::{CONTROLLER_SERVICE_ACCOUNT, LocalCluster, WEBHOOK_SERVICE_ACCOUNT};
use crate::process::{self, Tracked};
use crate::retry;

pub const WEBHOOK: &str = "kube-retention-webhook";
pub const CONTROLLER: &str = "kube-retention-controller";
/// A second controller replica, for tests of leader election.
pub const SECOND_CONTROLLER: &str = "kube-retention-controller-2";
/// A second webhook replica, for tests of a graceful stop.
pub const SECOND_WEBHOOK: &str = "kube-retention-webhook-2";
/// A webhook replica verifying its clients' certificates, for the test of client
/// authentication.
pub const VERIFYING_WEBHOOK: &str = "kube-retention-webhook-verifying";
/// Where the tests' CloudEvent sinks listen: a loopback address (Linux routes all of 127/8 to
/// `lo`) that the sink policy refuses by default, so the controller and the webhook are told to
/// allow it, and only it ([`SINK_ALLOW`]).
pub const SINK_ADDRESS: &str = "127.0.0.2";
/// The sink policy flag the local controller and webhook run with.
pub const SINK_ALLOW: &str = "--cloud-event-sink-allow=127.0.0.2/32";

/// Starts the webhook on the cluster's webhook port with the serving certificate under `pki/`.
pub fn start_webhook(cluster: &LocalCluster) -> Result<Tracked> {
    start_webhook_replica(cluster, WEBHOOK, cluster.webhook_port)
}

/// Starts a webhook replica named `name` (its pid file and log) on `port`.
pub fn start_webhook_replica(cluster: &LocalCluster, name: &str, port: u16) -> Result<Tracked> {
    start_webhook_with(cluster, name, port, &[])
}

/// As [`start_webhook_replica`], with `extra` flags.
pub fn start_webhook_with(
    cluster: &LocalCluster,
    name: &str,
    port: u16,
    extra: &[String],
) -> Result<Tracked> {
    let layout = &cluster.layout;
    let binary = layout.cargo_binary(WEBHOOK);
    ensure!(
        binary.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        binary.display()
    );
    process::spawn(
        &layout.state_dir,
        name,
        Command::new(binary)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!(
                "--tls-cert={}",
                layout.state("pki/webhook.crt").display()
            ))
            .arg(format!(
                "--tls-key={}",
                layout.state("pki/webhook.key").display()
            ))
            .arg(format!(
                "--kubeconfig={}",
                cluster
                    .service_account_kubeconfig(WEBHOOK_SERVICE_ACCOUNT)
                    .display()
            ))
            // A local process has no endpoints to wait for: drain after a second.
            .arg("--shutdown-delay=1s")
            .arg(SINK_ALLOW)
            .arg("--log-format=text")
            .args(extra),
    )
}

/// Waits until an admission round trip through the API server works: a server-side dry-run of
/// an annotated ConfigMap comes back stamped with `retention.dev/expires-at`.
pub fn wait_for_admission(cluster: &LocalCluster, timeout: Duration) -> Result<()> {
    let probe = r#"{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "admission-probe", "namespace": "default",
                     "annotations": {"retention.dev/ttl": "1m"}}}"#;
    retry(timeout, || {
        let output = crate::run_with_input(
            cluster
                .kubectl()
                .args(["create", "--dry-run=server", "--output=json", "-f", "-"]),
            probe,
        )?;
        let object: serde_json::Value = serde_json::from_str(&output)?;
        object
            .pointer("/metadata/annotations/retention.dev~1expires-at")
            .context("the webhook has not stamped the probe yet")?;
        Ok(())
    })
    .with_context(|| {
        format!(
            "no admission round trip within {timeout:?}: see {}",
            process::log_path(&cluster.layout.state_dir, WEBHOOK).display()
        )
    })
}

/// Starts a controller replica named `name` (its pid file, log and Lease identity) serving its
/// metrics on `metrics_port`, with the controller ServiceAccount's kubeconfig and `extra` flags
/// ([`SINK_ALLOW`] unless they set `--cloud-event-sink-allow`, circuit breakers of a million
/// deletions unless they set `--circuit-breaker` or `--cluster-circuit-breaker`, the
/// controller's own `expires-at` stamps unless they set `--stamp`).
pub fn start_controller(
    cluster: &LocalCluster,
    name: &str,
    metrics_port: u16,
    extra: &[String],
) -> Result<Tracked> {
    let mut flags = extra.to_vec();
    let unset = |flag: &str| {
        let set = format!("{flag}=");
        !extra.iter().any(|given| given.starts_with(&set))
    };
    if unset("--discovery-interval") {
        flags.push("--discovery-interval=1s".into());
    }
    if unset("--cloud-event-sink-allow") {
        flags.push(SINK_ALLOW.into());
    }
    // The breakers on, their ConfigMaps read and watched with the deploy/ RBAC, but out of reach
    // of the suites' thousands of deletions: the breakers' own scenarios set their limits.
    for flag in ["--circuit-breaker", "--cluster-circuit-breaker"] {
        if unset(flag) {
            flags.push(format!("{flag}=1000000/10m"));
        }
    }
    // The suites read each deadline off the object, where the controller's stamp (off by
    // default) puts it; the as-shipped suite runs the chart's default.
    if unset("--stamp") {
        flags.push("--stamp=finished".into());
    }
    let binary = cluster.layout.cargo_binary(CONTROLLER);
    start_controller_binary(cluster, &binary, name, metrics_port, &flags)
}

/// A controller from `binary` (a benchmark's baseline: the controller built at another commit)
/// as [`start_controller`] starts one, with `flags` and nothing else: another commit's
/// controller may not know the flags this one's suites set.
pub fn start_controller_binary(
    cluster: &LocalCluster,
    binary: &std::path::Path,
    name: &str,
    metrics_port: u16,
    flags: &[String],
) -> Result<Tracked> {
    ensure!(
        binary.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        binary.display()
    );
    let mut command = Command::new(binary);
    command
        .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
        .arg(format!(
            "--kubeconfig={}",
            cluster
                .service_account_kubeconfig(CONTROLLER_SERVICE_ACCOUNT)
                .display()
        ))
        .arg(format!("--identity={name}"))
        .arg("--lease-namespace=kube-retention")
        .arg("--log-format=text")
        .args(flags);
    process::spawn(&cluster.layout.state_dir, name, &mut command)
}

/// Waits until the controller on `port` has listed every kind it watches (its /readyz).
pub fn wait_for_controller(cluster: &LocalCluster, port: u16, timeout: Duration) -> Result<()> {
    retry(timeout, || ready(port)).with_context(|| {
        format!(
            "the controller was not ready within {timeout:?}: see {}",
            cluster.layout.state("logs").display()
        )
    })
}

/// As [`wait_for_controller`], for `controller`: failing as soon as it has ended (a flag it
/// refuses, say) rather than when `timeout` has passed.
pub fn wait_for_live_controller(
    cluster: &LocalCluster,
    controller: &Tracked,
    port: u16,
    timeout: Duration,
) -> Result<()> {
    let logs = cluster.layout.state("logs");
    let deadline = std::time::Instant::now() + timeout;
    // Gone twice a second apart: a process that ended stays ended (once, the benchmark's
    // second start of a baseline was taken for ended at once, and not since; not understood).
    let gone = || {
        controller.live_pid().is_none() && {
            std::thread::sleep(Duration::from_secs(1));
            controller.live_pid().is_none()
        }
    };
    loop {
        ensure!(
            !gone(),
            "the controller ended before it was ready: see {}",
            logs.display()
        );
        match ready(port) {
            Ok(()) => return Ok(()),
            Err(error) if std::time::Instant::now() > deadline => {
                return Err(error.context(format!(
                    "the controller was not ready within {timeout:?}: see {}",
                    logs.display()
                )));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Whether the controller on 127.0.0.1:`port` says it is ready.
fn ready(port: u16) -> Result<()> {
    let status = http_get(port, "/readyz")?;
    ensure!(status.starts_with("HTTP/1.1 200"), "not ready: {status}");
    Ok(())
}

/// The value of one counter `series` (its name and labels as exposed, e.g.
/// `kube_retention_watch_lists_total{kind="Job.batch"}`) on the `/metrics` of 127.0.0.1:`port`;
/// 0 while the series is not exposed (a counter family shows a series once it is counted).
pub fn counter(port: u16, series: &str) -> Result<u64> {
    let metrics = http_get(port, "/metrics")?;
    let prefix = format!("{series} ");
    let Some(value) = metrics.lines().find_map(|line| line.strip_prefix(&prefix)) else {
        return Ok(0);
    };
    value
        .trim()
        .parse()
        .with_context(|| format!("{series} is not a count: {value}"))
}

/// A plain HTTP GET on 127.0.0.1:`port`; the whole response as text.
pub fn http_get(port: u16, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// The output of kube-retention's process `name` ([`CONTROLLER`], [`WEBHOOK`]), a line each,
/// without the terminal's colour codes.
pub fn log_lines(cluster: &LocalCluster, name: &str) -> Result<Vec<String>> {
    let path = process::log_path(&cluster.layout.state_dir, name);
    let log =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(log.lines().map(without_colours).collect())
}

/// `line` without its terminal colour codes (`ESC [ … m`).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(char) = chars.next() {
        if char == '\u{1b}' {
            chars.by_ref().find(|code| *code == 'm');
        } else {
            plain.push(char);
        }
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::without_colours;

    #[test]
    fn colour_codes_are_taken_out_of_a_log_line() {
        let line =
            "\u{1b}[2m2026-11-28T01:08:18Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m API server: v1.33.13";
        assert_eq!(
            without_colours(line),
            "2026-11-28T01:08:18Z  INFO API server: v1.33.13"
        );
        assert_eq!(without_colours("plain"), "plain");
    }
}
