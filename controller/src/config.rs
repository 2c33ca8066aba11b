//! What the controller is built from ([`Config`]): the flags, grouped as the parts take them, and
//! what they mean already decided (the kinds selected, the propagation policy, which stamps to
//! write). [`Config::from_args`] is the one place that reads [`Args`]; every part takes its own
//! group, so a test builds the controller from a `Config` without a command line.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use kube::api::PropagationPolicy;
use kube_retention_common::kinds::KindSelection;
use kube_retention_evaluator::{Limits, Program};
use kube_retention_io::breaker::Limit;
use kube_retention_io::initial_list::{InitialList, PAGE_SIZE};
use kube_retention_runtime::SinkPolicyFlags;
use kube_retention_state::Stamping;

use crate::args::{Args, Events, Propagation, Stamp};

/// The controller's configuration, by part.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address for /metrics, /healthz and /readyz.
    pub metrics_address: SocketAddr,
    pub kinds: Kinds,
    pub lists: Lists,
    pub deletions: Deletions,
    pub breaker: Breaker,
    /// A new policy generation's deletions held for approval beyond this many (0: no guard).
    pub max_immediate_deletions: u32,
    pub lease: Lease,
    /// Whether Cleaners run at all.
    pub cleaners: bool,
    pub ledger: Ledger,
    /// Where CloudEvents may go, as the admin says; the API server and this pod are denied too.
    pub sink_policy: SinkPolicyFlags,
    /// This pod's IP: CloudEvents may not be sent to it.
    pub pod_ip: Option<IpAddr>,
    /// The API server's URL, from the client's configuration: CloudEvents may not be sent to
    /// it. [`Args::run`](crate::args::Args::run) sets it; a test without one denies none.
    pub api_server: Option<http::Uri>,
    pub evaluator: Evaluator,
    /// The most bytes tenants' decoded objects hold at once, every part's together.
    pub object_memory: usize,
}

/// The process tenants' CEL runs in: how to start it, and its bounds.
#[derive(Debug, Clone)]
pub struct Evaluator {
    /// This binary's hidden subcommand, by default; a test names the built binary.
    pub program: Program,
    pub limits: Limits,
}

/// Which kinds are watched, and how further ones are found.
#[derive(Debug, Clone)]
pub struct Kinds {
    pub selection: KindSelection,
    /// How often to scan for annotated kinds beyond the selection (zero: never).
    pub discovery_interval: Duration,
    /// How long start-up waits for missing permissions to be granted.
    pub permissions_timeout: Duration,
    /// The most objects tracked at once, every namespace's together.
    pub max_tracked: usize,
}

/// How kinds are listed.
#[derive(Debug, Clone, Copy)]
pub struct Lists {
    pub initial_list: InitialList,
    pub page_size: u32,
    /// Lists under way at once.
    pub concurrency: u32,
    /// The most a page of a paged list may weigh, in bytes.
    pub page_bytes: usize,
}

/// How deletions and the other writes go.
#[derive(Debug, Clone)]
pub struct Deletions {
    /// Writes a second (zero: unlimited).
    pub qps: u32,
    /// Requests in flight at once.
    pub concurrency: usize,
    pub propagation: PropagationPolicy,
    pub stamping: Stamping,
    /// Whether deletions are recorded as Events, and the window one Event gathers.
    pub events: bool,
    pub event_window: Duration,
}

/// The circuit breakers: each namespace's, and the cluster's over every namespace's total.
#[derive(Debug, Clone, Copy)]
pub struct Breaker {
    pub per_namespace: Limit,
    pub cluster: Limit,
}

impl Breaker {
    /// Whether either is on (then their state is stored).
    pub fn is_on(&self) -> bool {
        self.per_namespace.is_on() || self.cluster.is_on()
    }
}

/// Leader election: the Lease, and who holds it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub election: bool,
    pub name: String,
    /// The controller's own namespace: the Lease's, the breakers' ConfigMaps'.
    pub namespace: String,
    pub identity: String,
    pub duration: Duration,
}

/// The deletion ledger: where every deletion is announced, and how many may wait.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub sink: Option<String>,
    pub queue: usize,
}

impl Config {
    /// The configuration the flags say; the identity is `--identity`, else the host's name.
    pub fn from_args(args: &Args) -> Self {
        Self {
            metrics_address: args.metrics_address,
            kinds: Kinds {
                selection: args.kind_selection(),
                discovery_interval: args.discovery_interval,
                permissions_timeout: args.permissions_timeout,
                max_tracked: args.max_tracked_objects,
            },
            lists: Lists {
                initial_list: args.initial_list,
                page_size: PAGE_SIZE,
                concurrency: args.list_concurrency,
                page_bytes: args.list_page_memory.saturating_mul(1024 * 1024),
            },
            deletions: Deletions {
                qps: args.qps,
                concurrency: args.concurrency,
                propagation: match args.propagation_policy {
                    Propagation::Background => PropagationPolicy::Background,
                    Propagation::Foreground => PropagationPolicy::Foreground,
                    Propagation::Orphan => PropagationPolicy::Orphan,
                },
                stamping: match args.stamp {
                    Stamp::Finished => Stamping::Finished,
                    Stamp::Never => Stamping::Never,
                },
                events: args.events != Events::Off,
                event_window: match args.events {
                    Events::Within(window) => window,
                    Events::Off => Duration::ZERO,
                },
            },
            breaker: Breaker {
                per_namespace: args.circuit_breaker,
                cluster: args.cluster_circuit_breaker,
            },
            max_immediate_deletions: args.max_immediate_deletions,
            lease: Lease {
                election: args.leader_election,
                name: args.lease_name.clone(),
                namespace: args.lease_namespace.clone(),
                identity: args.identity.clone().unwrap_or_else(host_name),
                duration: Duration::from_secs(args.lease_duration),
            },
            cleaners: args.cleaners,
            ledger: Ledger {
                sink: args.ledger_sink.clone(),
                queue: args.ledger_queue,
            },
            sink_policy: args.sink_policy.clone(),
            pod_ip: args.pod_ip,
            api_server: None,
            evaluator: Evaluator {
                // The running binary itself, whatever became of its file since it started.
                program: Program {
                    path: "/proc/self/exe".into(),
                    args: vec![crate::EVALUATE.into()],
                },
                limits: Limits {
                    memory: args.evaluator_memory.saturating_mul(1024 * 1024),
                    ..Limits::default()
                },
            },
            object_memory: args.max_object_memory.saturating_mul(1024 * 1024),
        }
    }
}

/// This host's name (the pod's), else the controller's own name.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|| crate::NAME.to_owned())
}
