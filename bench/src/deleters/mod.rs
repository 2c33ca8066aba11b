//! The deleters the benchmarks compare, started fresh for every scenario so each peak RSS
//! belongs to one scenario: kube-retention's controller (release build, its own
//! ServiceAccount), kube-controller-manager running only `ttl-after-finished-controller` under a
//! client identity of its own, so the audit log tells their requests apart, the ceiling
//! (`ceiling-deleter`, an identity of its own too): what the API server accepts from a deleter
//! with no logic, and Kyverno's cleanup controller ([`crate::kyverno`]).

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::process::{self, Tracked};

mod deleter;

pub use crate::kubeconfigs::{CEILING_USER, PEER_USER};
use deleter::PEER;
pub use deleter::{
    BASELINE_ENV, BASELINE_REVISION_ENV, CEILING_CONCURRENCY, Deleter, TUNED_WORKERS,
    baseline_binary,
};

/// A running deleter; stopped on drop, and the control plane's kube-controller-manager started
/// again if the deleter replaced it.
pub struct Running {
    pub tracked: Tracked,
    replaced_controller_manager: Option<LocalCluster>,
    /// The cluster whose webhook configurations it leaves behind (Kyverno's), removed on drop.
    leaves_webhooks: Option<LocalCluster>,
    /// The length of its log when it started: the log is appended to by every process of its
    /// name, and what this one wrote follows.
    log_from: u64,
}

impl Running {
    pub fn pid(&self) -> Option<u32> {
        crate::live_pid(&self.tracked)
    }

    /// What this process wrote to its log (empty if nothing).
    pub fn own_log(&self) -> String {
        let log = self
            .tracked
            .log_path()
            .and_then(|path| std::fs::read(path).ok())
            .unwrap_or_default();
        let from = usize::try_from(self.log_from).map_or(log.len(), |from| from.min(log.len()));
        String::from_utf8_lossy(&log[from..]).into_owned()
    }
}

/// The length of the log of the process named `name`, 0 if there is none yet.
fn log_length(cluster: &LocalCluster, name: &str) -> u64 {
    std::fs::metadata(cluster.layout.state(&format!("logs/{name}.log"))).map_or(0, |log| log.len())
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tracked.stop(Duration::from_secs(10)).ok();
        if let Some(cluster) = &self.leaves_webhooks
            && let Err(error) = crate::kyverno::remove_webhooks(cluster)
        {
            eprintln!("removing Kyverno's webhook configurations: {error:#}");
        }
        if let Some(cluster) = &self.replaced_controller_manager
            && let Err(error) = cluster.start_controller_manager()
        {
            eprintln!("starting the control plane's kube-controller-manager again: {error:#}");
        }
    }
}

/// What a deleter is started for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Tracking only: the peer runs its TTL controller alone.
    Tracking,
    /// Deleting: the peer's kube-controller-manager also runs the garbage collector, under the
    /// same client budget, in place of the control plane's. The TTL controller deletes with
    /// foreground propagation, so a Job is gone only once the garbage collector has removed its
    /// `foregroundDeletion` finalizer, as in a real cluster's one kube-controller-manager.
    Deleting,
}

/// Starts `deleter` with `budget` requests per second (`None`: unlimited).
pub fn start(
    cluster: &LocalCluster,
    deleter: Deleter,
    budget: Option<u32>,
    metrics_port: u16,
    work: Work,
) -> Result<Running> {
    start_with(cluster, deleter, budget, metrics_port, work, &[])
}

/// [`start`], with `extra` flags for kube-retention (the ledger's sink).
pub fn start_with(
    cluster: &LocalCluster,
    deleter: Deleter,
    budget: Option<u32>,
    metrics_port: u16,
    work: Work,
    extra: &[String],
) -> Result<Running> {
    let collects_garbage = deleter.is_peer() && work == Work::Deleting;
    // Replaced, and started again on drop, only if it runs: `--huge` stops it for the whole run.
    let replaced_controller_manager =
        (collects_garbage && cluster.controller_manager_running()).then(|| cluster.clone());
    let mut controllers = vec!["ttl-after-finished-controller"];
    if collects_garbage {
        controllers.push("garbage-collector-controller");
    }
    if replaced_controller_manager.is_some() {
        cluster.stop_controller_manager()?;
    }
    let log_from = log_length(cluster, deleter.process_name());
    let tracked = match deleter {
        Deleter::Ceiling => anyhow::bail!("the ceiling starts knowing its expiry: start_ceiling"),
        Deleter::KyvernoTtl | Deleter::KyvernoPolicy => {
            let tracked = crate::kyverno::start(cluster, budget, deleter == Deleter::KyvernoTtl)?;
            first_to_go_out_of_memory(&tracked)?;
            tracked
        }
        Deleter::Peer | Deleter::PeerTuned => {
            // client-go's limiter: qps with an equal burst, like governor's per-second quota.
            let qps = budget.unwrap_or(1_000_000);
            let tracked =
                process::spawn(
                    &cluster.layout.state_dir,
                    PEER,
                    Command::new(cluster.layout.binary("kube-controller-manager"))
                        .arg(format!(
                            "--kubeconfig={}",
                            cluster.layout.state("peer.kubeconfig").display()
                        ))
                        .arg(format!("--controllers={}", controllers.join(",")))
                        .arg(format!("--kube-api-qps={qps}"))
                        .arg(format!("--kube-api-burst={qps}"))
                        .arg("--leader-elect=false")
                        .arg("--secure-port=0")
                        .args((deleter == Deleter::PeerTuned).then(|| {
                            format!("--concurrent-ttl-after-finished-syncs={TUNED_WORKERS}")
                        })),
                )
                .context("starting the peer kube-controller-manager")?;
            first_to_go_out_of_memory(&tracked)?;
            tracked
        }
        _ => {
            let mut flags = vec![
                format!("--qps={}", budget.unwrap_or(0)),
                "--leader-election=false".into(),
                // Deleting as fast as asked is what is measured; the breakers would stop it.
                "--circuit-breaker=off".into(),
                // As installed: the suites' one-second scan for new kinds would be most of an
                // idle controller's requests.
                controller_default("discovery-interval")?,
                // As installed too, where the suites turn the stamps on.
                if deleter == Deleter::KubeRetentionStamped {
                    "--stamp=finished".into()
                } else {
                    controller_default("stamp")?
                },
            ];
            // The baseline's one breaker was the cluster's, which its `--circuit-breaker` turns
            // off; it refuses a flag it never had.
            if deleter != Deleter::KubeRetentionBaseline {
                flags.push("--cluster-circuit-breaker=off".into());
                // Every Job tracked, as an admin who sizes the bound with the memory limit has
                // it: what a million take is what is measured.
                flags.push("--max-tracked-objects=10000000".into());
            }
            if deleter == Deleter::KubeRetentionEventEach {
                flags.push("--events=0s".into());
            }
            flags.extend(extra.iter().cloned());
            let tracked = if deleter == Deleter::KubeRetentionBaseline {
                let binary = deleter::baseline_binary().with_context(|| {
                    format!("no baseline controller: set {}", deleter::BASELINE_ENV)
                })?;
                components::start_controller_binary(
                    cluster,
                    &binary,
                    CONTROLLER,
                    metrics_port,
                    &flags,
                )?
            } else {
                components::start_controller(cluster, CONTROLLER, metrics_port, &flags)?
            };
            first_to_go_out_of_memory(&tracked)?;
            // Ready once every kind is listed: minutes at a million Jobs.
            components::wait_for_live_controller(
                cluster,
                &tracked,
                metrics_port,
                Duration::from_secs(900),
            )?;
            tracked
        }
    };
    Ok(Running {
        tracked,
        replaced_controller_manager,
        leaves_webhooks: deleter.is_kyverno().then(|| cluster.clone()),
        log_from,
    })
}

/// The controller's own default for `--flag` (what `--help` says and the chart leaves in place),
/// for runs that measure it as installed where [`components::start_controller`] sets another:
/// the suites scan for new kinds every second, an installed controller every
/// `--discovery-interval` default.
pub fn controller_default(flag: &str) -> Result<String> {
    use clap::CommandFactory;
    let command = kube_retention_controller::args::Args::command();
    let argument = command
        .get_arguments()
        .find(|argument| argument.get_long() == Some(flag))
        .with_context(|| format!("the controller has no flag --{flag}"))?;
    let default = argument
        .get_default_values()
        .first()
        .with_context(|| format!("the controller's --{flag} has no default"))?;
    Ok(format!("--{flag}={}", default.to_string_lossy()))
}

/// Makes a contender the kernel's first choice should the machine run out of memory (the
/// highest `oom_score_adj`, which any user may set on their own process): at the envelope's
/// sizes a deleter that cannot hold its objects is a finding, the API server's or etcd's end
/// would be the end of the run.
fn first_to_go_out_of_memory(tracked: &Tracked) -> Result<()> {
    let Some(pid) = crate::live_pid(tracked) else {
        return Ok(());
    };
    std::fs::write(format!("/proc/{pid}/oom_score_adj"), "1000")
        .with_context(|| format!("making {} the first to go out of memory", tracked.name))
}

/// Starts the ceiling against the Jobs of `namespace`, to delete them all at `at`. Its binary is
/// built beside the benchmark's.
pub fn start_ceiling(
    cluster: &LocalCluster,
    namespace: &str,
    at: jiff::Timestamp,
) -> Result<Running> {
    let binary = std::env::current_exe()?.with_file_name(CEILING_USER);
    let log_from = log_length(cluster, CEILING_USER);
    let tracked = process::spawn(
        &cluster.layout.state_dir,
        CEILING_USER,
        Command::new(&binary)
            .arg(format!(
                "--kubeconfig={}",
                cluster.layout.state("ceiling.kubeconfig").display()
            ))
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--at={at}"))
            .arg(format!("--concurrency={CEILING_CONCURRENCY}")),
    )
    .with_context(|| format!("starting {}", binary.display()))?;
    first_to_go_out_of_memory(&tracked)?;
    Ok(Running {
        tracked,
        replaced_controller_manager: None,
        leaves_webhooks: None,
        log_from,
    })
}
