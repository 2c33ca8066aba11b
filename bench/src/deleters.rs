//! The deleters the controller benchmark compares, started fresh for every scenario so each
//! peak RSS belongs to one scenario: kube-retention's controller (release build, its own
//! ServiceAccount), kube-controller-manager running only `ttl-after-finished-controller` under a
//! client identity of its own, so the audit log tells their requests apart, and the ceiling
//! (`ceiling-deleter`, an identity of its own too): what the API server accepts from a deleter
//! with no logic.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::{self, CONTROLLER};
use kube_retention_e2e::kubeconfig::{self, Credentials};
use kube_retention_e2e::process::{self, Tracked};

/// The peer's client identity (a client certificate's common name).
pub const PEER_USER: &str = "ttl-after-finished-peer";
const PEER: &str = "ttl-after-finished-peer";
/// The ceiling's client identity, and its process's name.
pub const CEILING_USER: &str = "ceiling-deleter";
/// DELETEs the ceiling keeps in flight: four times kube-retention's default `--concurrency`, so
/// that the API server, not the ceiling, sets the pace.
pub const CEILING_CONCURRENCY: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleter {
    KubeRetention,
    /// kube-retention recording one Event per deletion (`--event-window=0s`), as before
    /// Events were aggregated.
    KubeRetentionEventEach,
    /// kube-retention writing no stamps (`--stamp=never`): one request per deletion.
    KubeRetentionNoStamp,
    /// kube-retention announcing every deletion to a deletion-ledger sink (`--ledger-sink`).
    KubeRetentionLedger,
    /// kube-controller-manager's TTL controller with its default 5 workers.
    Peer,
    /// The same with [`TUNED_WORKERS`] workers (`--concurrent-ttl-after-finished-syncs`).
    PeerTuned,
    /// `ceiling-deleter`: lists the Jobs before their expiry, then sends each one DELETE with
    /// preconditions at the expiry, [`CEILING_CONCURRENCY`] in flight ([`start_ceiling`]).
    Ceiling,
    /// Kyverno's cleanup controller, each Job labelled with its expiry (`cleanup.kyverno.io/ttl`).
    KyvernoTtl,
    /// Kyverno's cleanup controller, a DeletingPolicy every minute ([`crate::kyverno`]).
    KyvernoPolicy,
}

/// The tuned peer's workers.
pub const TUNED_WORKERS: u32 = 50;

impl Deleter {
    pub fn label(self) -> String {
        match self {
            Self::KubeRetention => "kube-retention".into(),
            Self::KubeRetentionEventEach => "kube-retention, an Event per deletion".into(),
            Self::KubeRetentionNoStamp => "kube-retention, --stamp=never".into(),
            Self::KubeRetentionLedger => "kube-retention, --ledger-sink".into(),
            Self::Peer => "kube-controller-manager ttl-after-finished".into(),
            Self::PeerTuned => {
                format!("kube-controller-manager ttl-after-finished, {TUNED_WORKERS} workers")
            }
            Self::Ceiling => "ceiling: a DELETE each, no logic".into(),
            Self::KyvernoTtl => "Kyverno, the cleanup.kyverno.io/ttl label".into(),
            Self::KyvernoPolicy => "Kyverno, a DeletingPolicy every minute".into(),
        }
    }

    /// A short name for the namespaces of its runs.
    pub fn slug(self) -> &'static str {
        match self {
            Self::KubeRetention => "kr",
            Self::KubeRetentionEventEach => "kr-each",
            Self::KubeRetentionNoStamp => "kr-nostamp",
            Self::KubeRetentionLedger => "kr-ledger",
            Self::Peer => "peer",
            Self::PeerTuned => "peer-tuned",
            Self::Ceiling => "ceiling",
            Self::KyvernoTtl => "kyverno-ttl",
            Self::KyvernoPolicy => "kyverno-policy",
        }
    }

    pub fn user(self) -> String {
        if self.is_kube_retention() {
            LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT)
        } else if self.is_peer() {
            PEER_USER.to_owned()
        } else if self.is_kyverno() {
            crate::kyverno::USER.to_owned()
        } else {
            CEILING_USER.to_owned()
        }
    }

    /// kube-retention's controller, with whatever flags.
    pub fn is_kube_retention(self) -> bool {
        matches!(
            self,
            Self::KubeRetention
                | Self::KubeRetentionEventEach
                | Self::KubeRetentionNoStamp
                | Self::KubeRetentionLedger
        )
    }

    /// kube-controller-manager's TTL controller, with whatever workers.
    pub fn is_peer(self) -> bool {
        matches!(self, Self::Peer | Self::PeerTuned)
    }

    /// Kyverno's cleanup controller, either way.
    pub fn is_kyverno(self) -> bool {
        matches!(self, Self::KyvernoTtl | Self::KyvernoPolicy)
    }

    /// The name its process is tracked, and its log written, under.
    fn process_name(self) -> &'static str {
        if self.is_peer() {
            PEER
        } else if self.is_kyverno() {
            crate::kyverno::USER
        } else if self == Self::Ceiling {
            CEILING_USER
        } else {
            CONTROLLER
        }
    }
}

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

/// Writes the peer's and the ceiling's kubeconfigs: each a client certificate from the cluster
/// CA, in system:masters.
pub fn write_peer_kubeconfig(cluster: &LocalCluster) -> Result<()> {
    write_kubeconfig(cluster, PEER_USER, "peer.kubeconfig", &["system:masters"])?;
    write_kubeconfig(
        cluster,
        CEILING_USER,
        "ceiling.kubeconfig",
        &["system:masters"],
    )
}

/// Writes the state file `file`: a kubeconfig with a client certificate from the cluster CA for
/// `user` in `groups`.
pub fn write_kubeconfig(
    cluster: &LocalCluster,
    user: &str,
    file: &str,
    groups: &[&str],
) -> Result<()> {
    let layout = &cluster.layout;
    let ca = kube_retention_certs::CertificateAuthority::from_pem(
        &std::fs::read_to_string(layout.state("pki/ca.crt"))?,
        &std::fs::read_to_string(layout.state("pki/ca.key"))?,
    )?;
    let client = ca.issue_client(user, groups, time::Duration::days(1))?;
    kubeconfig::write(
        &layout.state(file),
        &cluster.server(),
        &ca.certified().cert_pem,
        Credentials::ClientCertificate {
            cert_pem: &client.cert_pem,
            key_pem: &client.key_pem,
        },
    )
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
            let tracked = crate::kyverno::start(cluster, budget)?;
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
                // Deleting as fast as asked is what is measured; the breaker would stop it.
                "--circuit-breaker-deletions=0".into(),
            ];
            if deleter == Deleter::KubeRetentionEventEach {
                flags.push("--event-window=0s".into());
            }
            if deleter == Deleter::KubeRetentionNoStamp {
                flags.push("--stamp=never".into());
            }
            flags.extend(extra.iter().cloned());
            let tracked = components::start_controller(cluster, CONTROLLER, metrics_port, &flags)?;
            first_to_go_out_of_memory(&tracked)?;
            // Ready once every kind is listed: minutes at a million Jobs.
            components::wait_for_controller(cluster, metrics_port, Duration::from_secs(900))?;
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
