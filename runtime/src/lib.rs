//! What kube-retention's binaries (webhook, controller, certs) share around their own work: a
//! Kubernetes client from `--kubeconfig` or the environment, logging, the shutdown signal, the
//! flags both the webhook and the controller take ([`SinkPolicyFlags`]), the supervision of
//! their background tasks ([`supervise`]), and fairness between tenants: one queue each, served
//! round robin ([`fair`]), and each one's share of a CPU-bound service's time ([`time_shares`]);
//! and what a decoded object holds on the heap, which every bound on tenants' objects charges
//! ([`held`]), within one budget of it for the whole controller ([`object_memory`]).

use std::path::Path;

use clap::ValueEnum;
use kube_retention_common::sink_policy::{FlagError, SinkPolicy};
use tracing_subscriber::EnvFilter;

pub mod discovery;
pub mod fair;
pub mod held;
pub mod object_memory;
pub mod sinks;
pub mod supervise;
pub mod time_shares;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Where Cleaners' CloudEvents may go: the controller enforces it, the webhook warns with it,
/// so both take the same flags (the chart sets both from `controller.sinkPolicy`).
#[derive(Debug, Clone, clap::Args)]
pub struct SinkPolicyFlags {
    /// Where Cleaners' CloudEvents may go: a CIDR (10.20.0.0/16, 127.0.0.2/32), a host name
    /// (events.example.com) or names under a domain (*.example.com). Repeatable. None: anywhere
    /// not denied; otherwise only what these cover. A CIDR as specific as a denied range
    /// re-allows it (loopback, link-local, multicast and unspecified addresses and the clouds'
    /// metadata services are denied).
    #[arg(
        long = "cloud-event-sink-allow",
        env = "KUBE_RETENTION_CLOUD_EVENT_SINK_ALLOW",
        value_delimiter = ','
    )]
    pub allow: Vec<String>,
    /// Further CIDRs CloudEvents may not go to: what the API does not say, such as pod
    /// addresses a CNI allocates outside the nodes' podCIDRs. Repeatable. The clouds' metadata
    /// services are denied by default; the controller also denies its own address, the API
    /// server's, and the service CIDRs, node pod CIDRs and addresses and API server endpoints
    /// it learns from the API.
    #[arg(
        long = "cloud-event-sink-deny",
        env = "KUBE_RETENTION_CLOUD_EVENT_SINK_DENY",
        value_delimiter = ','
    )]
    pub deny: Vec<String>,
    /// The URL schemes CloudEvents may be sent with.
    #[arg(
        long = "cloud-event-sink-schemes",
        env = "KUBE_RETENTION_CLOUD_EVENT_SINK_SCHEMES",
        value_delimiter = ',',
        default_value = "https,http"
    )]
    pub schemes: Vec<String>,
}

impl SinkPolicyFlags {
    /// The policy these flags say, or which flag is wrong and why.
    pub fn policy(&self) -> Result<SinkPolicy, FlagError> {
        SinkPolicy::from_flags(&self.schemes, &self.allow, &self.deny)
    }
}

/// How a server binary ends: success, or its error logged naming `program` and a failing exit
/// code.
pub fn exit_code(
    program: &str,
    outcome: Result<(), impl std::fmt::Display>,
) -> std::process::ExitCode {
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "{program} failed");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs at `RUST_LOG` (default info) in `format`.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
        LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter).init(),
    }
}

/// A client from `kubeconfig`, else in-cluster, else `$KUBECONFIG` / `~/.kube/config`.
pub async fn client(kubeconfig: Option<&Path>) -> kube::Result<kube::Client> {
    kube::Client::try_from(config(kubeconfig).await?)
}

/// The client configuration [`client`] uses, for what else it tells (the API server's URL).
pub async fn config(kubeconfig: Option<&Path>) -> kube::Result<kube::Config> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(kube::Error::InferKubeconfig)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(kube::Error::InferKubeconfig)?
        }
        None => kube::Config::infer()
            .await
            .map_err(kube::Error::InferConfig)?,
    };
    Ok(config)
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                return std::future::pending().await;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
}
