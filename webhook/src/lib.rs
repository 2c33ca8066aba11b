//! kube-retention's admission webhook.
//!
//! - [`validate`]: denies objects whose retention settings are invalid, naming every bad field.
//! - [`mutate`]: copies Build (and BuildConfig) TTLs into new runs and stamps
//!   `retention.dev/expires-at` wherever admission can compute it.
//! - [`review`]: decodes AdmissionReviews and dispatches them; malformed input gets a clear error.
//! - [`limits`], [`memory`] and [`compilations`]: the bounds on admission work — a deadline per
//!   request, the reviews answered at once, the bytes they hold (bodies arriving and decoded
//!   parts, in one budget that takes room back from the slowest bodies), CEL compiled off the
//!   async workers a few at a time, each namespace within its share of the time.
//! - [`sink_warnings`]: warns about a Cleaner's CloudEvent sink the sink policy refuses.
//! - [`tls`] and [`server`]: HTTPS over rustls with certificate hot-reload (a supervised task).

pub mod access;
pub mod app;
pub mod args;
pub mod body;
pub mod compilations;
pub mod connections;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod mutate;
pub mod parents;
pub mod policy_warnings;
pub mod review;
pub mod router;
pub mod server;
pub mod sink_warnings;
pub mod tls;
pub mod validate;
pub mod writers;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use kube_retention_common::Registry;
use kube_retention_common::sink_policy::SinkPolicy;

/// Everything a request handler needs, shared behind an `Arc`.
pub struct Context {
    pub parents: Arc<dyn parents::Parents>,
    /// The kinds handled: built-in ones switched off with `--disable-kind` are left alone.
    pub kinds: Registry,
    /// Whether the controller may delete objects of kinds beyond the built-in ones.
    pub access: Arc<dyn access::ControllerAccess>,
    /// Whether writers may delete what their retention settings govern; `None`: not checked.
    pub writers: Option<Arc<dyn writers::WriterAccess>>,
    /// The controller's user: its own writes (stamps, labels) are not checked.
    pub controller_user: String,
    /// Where the controller may send Cleaners' CloudEvents: admission warns about the rest.
    pub sink_policy: Arc<SinkPolicy>,
    pub metrics: metrics::Metrics,
    /// The deadline of each request and the bound on requests in flight.
    pub limits: limits::Limits,
    /// The bytes every admission holds, bodies and decoded parts alike.
    pub memory: Arc<memory::Memory>,
    /// Where policies' and Cleaners' expressions are compiled, a few at a time, each namespace
    /// within its share.
    pub compilations: compilations::Compilations,
    /// Set on SIGTERM: `/readyz` fails so the Service stops sending here, and each response
    /// closes its connection so clients reconnect to another replica before this one stops.
    pub draining: AtomicBool,
}

impl Context {
    pub fn new(parents: Arc<dyn parents::Parents>) -> Self {
        let metrics = metrics::Metrics::default();
        Self {
            parents,
            kinds: Registry::builtin().clone(),
            access: Arc::new(access::Granted),
            writers: None,
            controller_user: String::new(),
            sink_policy: Arc::new(SinkPolicy::default()),
            compilations: compilations::Compilations::new(
                compilations::CompileLimits::default(),
                metrics.compilations_running.clone(),
            ),
            limits: limits::Limits::default(),
            memory: Arc::new(metrics.memory(memory::DEFAULT_CAPACITY)),
            metrics,
            draining: AtomicBool::new(false),
        }
    }

    /// With `limits` on admissions, and compilations within `compile`.
    pub fn with_limits(self, limits: limits::Limits, compile: compilations::CompileLimits) -> Self {
        let compilations =
            compilations::Compilations::new(compile, self.metrics.compilations_running.clone());
        Self {
            limits,
            compilations,
            ..self
        }
    }

    /// With `bytes` of memory for admissions ([`memory`]).
    pub fn with_memory(self, bytes: usize) -> Self {
        Self {
            memory: Arc::new(self.metrics.memory(bytes)),
            ..self
        }
    }

    pub fn with_kinds(self, kinds: Registry) -> Self {
        Self { kinds, ..self }
    }

    pub fn with_access(self, access: Arc<dyn access::ControllerAccess>) -> Self {
        Self { access, ..self }
    }

    pub fn with_sink_policy(self, sink_policy: SinkPolicy) -> Self {
        Self {
            sink_policy: Arc::new(sink_policy),
            ..self
        }
    }

    /// Checks writers of retention settings with `writers`, except `controller_user`.
    pub fn with_writers(
        self,
        writers: Arc<dyn writers::WriterAccess>,
        controller_user: &str,
    ) -> Self {
        Self {
            writers: Some(writers),
            controller_user: controller_user.to_owned(),
            ..self
        }
    }

    pub fn lookups(&self) -> mutate::Lookups<'_> {
        mutate::Lookups {
            kinds: &self.kinds,
            parents: self.parents.as_ref(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("serving admission requests: {0}")]
    Serve(#[source] std::io::Error),
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error("binding the {what} address {address}: {source}")]
    Bind {
        /// "admission", "metrics".
        what: &'static str,
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Kinds(#[from] kube_retention_common::kinds::SelectionError),
    #[error(transparent)]
    SinkPolicy(#[from] kube_retention_common::sink_policy::FlagError),
    #[error(transparent)]
    TaskEnded(#[from] kube_retention_runtime::supervise::Ended),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
