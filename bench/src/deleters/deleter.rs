//! Which deleter: each one `make bench-controller` and `make bench-peers` compare, its label in
//! the tables, its client identity in the audit log and the name its process runs under.

use kube_retention_e2e::LocalCluster;
use kube_retention_e2e::cluster::CONTROLLER_SERVICE_ACCOUNT;
use kube_retention_e2e::components::CONTROLLER;

use crate::kubeconfigs::{CEILING_USER, PEER_USER};

/// The peer's process name.
pub(super) const PEER: &str = "ttl-after-finished-peer";

/// DELETEs the ceiling keeps in flight: four times kube-retention's default `--concurrency`, so
/// that the API server, not the ceiling, sets the pace.
pub const CEILING_CONCURRENCY: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleter {
    KubeRetention,
    /// kube-retention recording one Event per deletion (`--events=0s`), as before
    /// Events were aggregated.
    KubeRetentionEventEach,
    /// kube-retention stamping each finished Job's deadline (`--stamp=finished`): a PATCH per
    /// Job beside its DELETE.
    KubeRetentionStamped,
    /// kube-retention announcing every deletion to a deletion-ledger sink (`--ledger-sink`).
    KubeRetentionLedger,
    /// kube-retention's controller built at another commit (its binary in
    /// [`BASELINE_ENV`]'s folder): what a change is measured against, in the same run.
    KubeRetentionBaseline,
    /// kube-controller-manager's TTL controller with its default 5 workers.
    Peer,
    /// The same with [`TUNED_WORKERS`] workers (`--concurrent-ttl-after-finished-syncs`).
    PeerTuned,
    /// `ceiling-deleter`: lists the Jobs before their expiry, then sends each one DELETE with
    /// preconditions at the expiry, [`CEILING_CONCURRENCY`] in flight ([`super::start_ceiling`]).
    Ceiling,
    /// Kyverno's cleanup controller, each Job labelled with its expiry (`cleanup.kyverno.io/ttl`).
    KyvernoTtl,
    /// Kyverno's cleanup controller, a DeletingPolicy every minute ([`crate::kyverno`]).
    KyvernoPolicy,
}

/// The folder of the baseline controller's binary (`make bench-controller` builds it at
/// `BASELINE`, a commit, and says which in [`BASELINE_REVISION_ENV`]).
pub const BASELINE_ENV: &str = "KUBE_RETENTION_BASELINE";
/// The commit the baseline was built at.
pub const BASELINE_REVISION_ENV: &str = "KUBE_RETENTION_BASELINE_REVISION";

/// The baseline controller's binary, if the run was given one.
pub fn baseline_binary() -> Option<std::path::PathBuf> {
    let folder = std::env::var_os(BASELINE_ENV)?;
    Some(std::path::Path::new(&folder).join(CONTROLLER))
}

/// The tuned peer's workers.
pub const TUNED_WORKERS: u32 = 50;

impl Deleter {
    pub fn label(self) -> String {
        match self {
            Self::KubeRetention => "kube-retention".into(),
            Self::KubeRetentionEventEach => "kube-retention, an Event per deletion".into(),
            Self::KubeRetentionStamped => "kube-retention, --stamp=finished".into(),
            Self::KubeRetentionLedger => "kube-retention, --ledger-sink".into(),
            Self::KubeRetentionBaseline => format!(
                "kube-retention at {}",
                std::env::var(BASELINE_REVISION_ENV).unwrap_or_else(|_| "the baseline".into())
            ),
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
            Self::KubeRetentionStamped => "kr-stamped",
            Self::KubeRetentionLedger => "kr-ledger",
            Self::KubeRetentionBaseline => "kr-baseline",
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
                | Self::KubeRetentionStamped
                | Self::KubeRetentionLedger
                | Self::KubeRetentionBaseline
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

    /// How long after it starts it acts on what it finds: kube-retention's start waited until
    /// it had listed, Kyverno's until it led (and, for the label, until it watched Jobs); the
    /// peer gets time for its informers and its garbage collector's graph to sync.
    pub fn settle(self) -> std::time::Duration {
        let seconds = match self {
            Self::Peer | Self::PeerTuned => 10,
            _ => 1,
        };
        std::time::Duration::from_secs(seconds)
    }

    /// What it needs applied in `namespace` before it can delete Jobs there `ttl` seconds
    /// after they finish: a DeletingPolicy for Kyverno's (removed when dropped), nothing for
    /// the others, whose setting is on the Jobs.
    pub fn deleting_policy(
        self,
        cluster: &LocalCluster,
        namespace: &str,
        ttl: u32,
    ) -> anyhow::Result<Option<crate::kyverno::DeletingPolicy>> {
        (self == Self::KyvernoPolicy)
            .then(|| crate::kyverno::DeletingPolicy::apply(cluster, namespace, ttl))
            .transpose()
    }

    /// Whether it records Events for its deletions, which a run waits to see settle: Kyverno
    /// records none in the Jobs' namespace, and the ceiling none at all.
    pub fn records_events(self) -> bool {
        self.is_kube_retention() || self.is_peer()
    }

    /// The name its process is tracked, and its log written, under.
    pub(super) fn process_name(self) -> &'static str {
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
