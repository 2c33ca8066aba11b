//! The two deleters the controller benchmark compares, started fresh for every scenario so each
//! peak RSS belongs to one scenario: kube-retention's controller (release build, its own
//! ServiceAccount) and kube-controller-manager running only `ttl-after-finished-controller`
//! under a client identity of its own, so the audit log tells their requests apart.

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
        }
    }

    pub fn user(self) -> String {
        match self {
            Self::KubeRetention
            | Self::KubeRetentionEventEach
            | Self::KubeRetentionNoStamp
            | Self::KubeRetentionLedger => {
                LocalCluster::service_account_user(CONTROLLER_SERVICE_ACCOUNT)
            }
            Self::Peer | Self::PeerTuned => PEER_USER.to_owned(),
        }
    }
}

/// A running deleter; stopped on drop, and the control plane's kube-controller-manager started
/// again if the deleter replaced it.
pub struct Running {
    pub tracked: Tracked,
    replaced_controller_manager: Option<LocalCluster>,
}

impl Running {
    pub fn pid(&self) -> Option<u32> {
        self.tracked
            .live_pid()
            .map(|pid| pid.as_raw().unsigned_abs())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tracked.stop(Duration::from_secs(10)).ok();
        if let Some(cluster) = &self.replaced_controller_manager
            && let Err(error) = cluster.start_controller_manager()
        {
            eprintln!("starting the control plane's kube-controller-manager again: {error:#}");
        }
    }
}

/// Writes the peer's kubeconfig: a client certificate from the cluster CA, in system:masters.
pub fn write_peer_kubeconfig(cluster: &LocalCluster) -> Result<()> {
    let layout = &cluster.layout;
    let ca = kube_retention_certs::CertificateAuthority::from_pem(
        &std::fs::read_to_string(layout.state("pki/ca.crt"))?,
        &std::fs::read_to_string(layout.state("pki/ca.key"))?,
    )?;
    let client = ca.issue_client(PEER_USER, &["system:masters"], time::Duration::days(1))?;
    kubeconfig::write(
        &layout.state("peer.kubeconfig"),
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
    let peer = matches!(deleter, Deleter::Peer | Deleter::PeerTuned);
    let replaced_controller_manager = (peer && work == Work::Deleting).then(|| cluster.clone());
    let mut controllers = vec!["ttl-after-finished-controller"];
    if replaced_controller_manager.is_some() {
        controllers.push("garbage-collector-controller");
        cluster.stop_controller_manager()?;
    }
    let tracked = match deleter {
        Deleter::KubeRetention
        | Deleter::KubeRetentionEventEach
        | Deleter::KubeRetentionNoStamp
        | Deleter::KubeRetentionLedger => {
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
            components::wait_for_controller(cluster, metrics_port, Duration::from_secs(120))?;
            tracked
        }
        Deleter::Peer | Deleter::PeerTuned => {
            // client-go's limiter: qps with an equal burst, like governor's per-second quota.
            let qps = budget.unwrap_or(1_000_000);
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
                    .args(
                        (deleter == Deleter::PeerTuned).then(|| {
                            format!("--concurrent-ttl-after-finished-syncs={TUNED_WORKERS}")
                        }),
                    ),
            )
            .context("starting the peer kube-controller-manager")?
        }
    };
    Ok(Running {
        tracked,
        replaced_controller_manager,
    })
}
