//! Command-line flags (each also settable through the environment).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kube_retention_runtime::LogFormat;

use crate::compilations::{
    CompileLimits, DEFAULT_MAX_COMPILATIONS, DEFAULT_NAMESPACE_BURST, DEFAULT_NAMESPACE_SHARE,
};
use crate::connections;
use crate::limits::{DEFAULT_DECODED_PER_REVIEW, DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT};
use crate::memory;
use crate::router::DEFAULT_MAX_BODY_BYTES;
use crate::server::DEFAULT_MAX_STREAMS;

#[derive(Debug, Parser)]
#[command(
    name = "kube-retention-webhook",
    version,
    about = "kube-retention's admission webhook"
)]
pub struct Args {
    /// Address to serve HTTPS on.
    #[arg(long, env = "KUBE_RETENTION_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// PEM certificate chain to serve; reloaded when it changes.
    #[arg(long, env = "KUBE_RETENTION_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// PEM private key of the certificate; reloaded when it changes.
    #[arg(long, env = "KUBE_RETENTION_TLS_KEY")]
    pub tls_key: PathBuf,
    /// PEM CA certificates that clients must present a certificate of: a connection without
    /// one fails its TLS handshake, so only an API server given such a client certificate (its
    /// AdmissionConfiguration's kubeConfigFile) is answered. Probes and metrics then need
    /// --metrics-address. Unset: any client is answered.
    #[arg(long, env = "KUBE_RETENTION_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Where to serve /healthz, /readyz and /metrics in plain HTTP besides the HTTPS address
    /// (which serves them too while clients are not verified). Unset: not served apart.
    #[arg(long, env = "KUBE_RETENTION_METRICS_ADDRESS")]
    pub metrics_address: Option<SocketAddr>,
    /// How often to check the certificate files for changes.
    #[arg(long, env = "KUBE_RETENTION_CERT_RELOAD_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub cert_reload_interval: Duration,
    /// Largest AdmissionReview body accepted, in bytes.
    #[arg(long, env = "KUBE_RETENTION_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// The bytes admissions may hold at once, in all: bodies arriving or not yet decoded, and
    /// what is kept of each review once decoded. Where a body or a review needs room, the
    /// bodies arriving slowest (fewest bytes a second) are cut off (503) to make it; past that
    /// a review is refused unjudged (503), and the API server applies the registration's
    /// failurePolicy. Keep it at least twice --max-body-bytes, and within the container's
    /// memory limit with room to spare.
    #[arg(long, env = "KUBE_RETENTION_MAX_ADMISSION_MEMORY", default_value_t = memory::DEFAULT_CAPACITY)]
    pub max_admission_memory: usize,
    /// The most admission keeps of one review once decoded, in bytes: the fields it reads of
    /// an object (its metadata and retention fields), a policy or a Cleaner whole. A review
    /// past it is not judged: a validation is refused, a mutation admitted unchanged, both
    /// saying why.
    #[arg(long, env = "KUBE_RETENTION_MAX_DECODED_BYTES", default_value_t = DEFAULT_DECODED_PER_REVIEW)]
    pub max_decoded_bytes: usize,
    /// The longest an admission may take, from its first byte to its answer: keep it below the
    /// registrations' timeoutSeconds (3). A validation not finished by then is refused, a
    /// mutation admitted unchanged, both with a message saying so; a body not received by then
    /// is cut off.
    #[arg(long, env = "KUBE_RETENTION_ADMISSION_TIMEOUT", default_value_t = DEFAULT_TIMEOUT.into())]
    pub admission_timeout: humantime::Duration,
    /// Admissions answered at once, counted from when a body has arrived whole; beyond them a
    /// review is refused unjudged (503), and the API server applies the registration's
    /// failurePolicy.
    #[arg(long, env = "KUBE_RETENTION_MAX_ADMISSIONS_IN_FLIGHT", default_value_t = DEFAULT_MAX_IN_FLIGHT)]
    pub max_admissions_in_flight: usize,
    /// Admissions whose CEL expressions (policies, Cleaners) are compiled at once, each on a
    /// blocking thread of its own; the others wait for their turn within their deadline.
    #[arg(long, env = "KUBE_RETENTION_MAX_COMPILATIONS", default_value_t = DEFAULT_MAX_COMPILATIONS)]
    pub max_compilations: usize,
    /// Each namespace's share of one core for compiling its policies' and Cleaners' CEL
    /// (cluster-scoped policies share one): a namespace that used more has its admissions with
    /// CEL refused (429, saying when to try again) until its share has paid for what it took.
    #[arg(long, env = "KUBE_RETENTION_NAMESPACE_COMPILE_SHARE", default_value_t = DEFAULT_NAMESPACE_SHARE, value_parser = share_of_a_core)]
    pub namespace_compile_share: f64,
    /// The most compile time a namespace may use at once before its share applies.
    #[arg(long, env = "KUBE_RETENTION_NAMESPACE_COMPILE_BURST", default_value_t = DEFAULT_NAMESPACE_BURST.into())]
    pub namespace_compile_burst: humantime::Duration,
    /// Connections open at once on the HTTPS address, TLS handshakes included. Past it, the
    /// next waits in the kernel's accept queue while one is chosen among those open a second
    /// or more: the one idle longest is closed (where none is idle, the one whose request has
    /// been in flight longest is dropped; one asked to close and open a second later is
    /// dropped), so that it waits two seconds at most.
    #[arg(long, env = "KUBE_RETENTION_MAX_CONNECTIONS", default_value_t = connections::DEFAULT_MAX)]
    pub max_connections: usize,
    /// Connections one address may have open at once; past it, a new one is closed as soon
    /// as it is accepted. The API server needs a few.
    #[arg(long, env = "KUBE_RETENTION_MAX_CONNECTIONS_PER_PEER", default_value_t = connections::DEFAULT_MAX_PER_PEER)]
    pub max_connections_per_peer: usize,
    /// How long a connection (HTTP/1 or HTTP/2) may stay open without a request before it is
    /// closed; the API server opens another when it next calls.
    #[arg(long, env = "KUBE_RETENTION_IDLE_CONNECTION_TIMEOUT", default_value_t = connections::DEFAULT_IDLE_TIMEOUT.into())]
    pub idle_connection_timeout: humantime::Duration,
    /// Streams one HTTP/2 connection may have open at once; the API server opens another
    /// connection past it.
    #[arg(long, env = "KUBE_RETENTION_MAX_STREAMS_PER_CONNECTION", default_value_t = DEFAULT_MAX_STREAMS)]
    pub max_streams_per_connection: u32,
    /// After SIGTERM, how long to keep serving (not ready, closing each connection after its
    /// response) while the Service's endpoints catch up, before draining and exiting.
    #[arg(long, env = "KUBE_RETENTION_SHUTDOWN_DELAY", default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,
    /// Leave a built-in kind alone (neither validated nor mutated), by `Kind.group` name: `Pod`,
    /// `Job.batch`, `BuildRun.shipwright.io`... Repeatable; set it like the controller's.
    #[arg(
        long = "disable-kind",
        env = "KUBE_RETENTION_DISABLED_KINDS",
        value_delimiter = ' '
    )]
    pub disabled_kinds: Vec<String>,
    /// The controller's user name: admission warns when it may not delete objects of a kind
    /// given retention settings. Empty: no check.
    #[arg(
        long,
        env = "KUBE_RETENTION_CONTROLLER_USER",
        default_value = "system:serviceaccount:kube-retention:kube-retention-controller"
    )]
    pub controller_user: String,
    /// Admit a retention setting only from a writer who may delete what it governs (asked with a
    /// SubjectAccessReview). Off, anyone who may write an object may have the controller delete
    /// it, with the controller's permissions.
    #[arg(long, env = "KUBE_RETENTION_CHECK_WRITERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub check_writers: bool,
    /// Where Cleaners' CloudEvents may go, as the controller is told: admission warns about a
    /// sink outside it.
    #[command(flatten)]
    pub sink_policy: kube_retention_runtime::SinkPolicyFlags,
    /// Kubeconfig to reach the API server with (default: in-cluster, then $KUBECONFIG).
    #[arg(long, env = "KUBE_RETENTION_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Log format.
    #[arg(long, env = "KUBE_RETENTION_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

impl Args {
    /// The bounds on the HTTPS address's connections.
    pub fn connection_bounds(&self) -> connections::Bounds {
        connections::Bounds {
            max: self.max_connections,
            max_per_peer: self.max_connections_per_peer,
            idle_timeout: self.idle_connection_timeout.into(),
        }
    }

    /// How much compiling admissions may do.
    pub fn compile_limits(&self) -> CompileLimits {
        CompileLimits {
            at_once: self.max_compilations,
            namespace_share: self.namespace_compile_share,
            namespace_burst: self.namespace_compile_burst.into(),
        }
    }
}

/// A share of one core: above 0, at most 1.
fn share_of_a_core(value: &str) -> Result<f64, String> {
    let share: f64 = value
        .parse()
        .map_err(|error| format!("{value:?} is not a number: {error}"))?;
    if share > 0.0 && share <= 1.0 {
        Ok(share)
    } else {
        Err(format!(
            "{value} is not a share of one core (above 0, at most 1)"
        ))
    }
}
