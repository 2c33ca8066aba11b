//! Command-line flags (each also settable through the environment), grouped in `--help` as an
//! admin looks for them: deletions, safety rails, kinds, lists, leader election, Cleaners and
//! CloudEvents, the process.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use kube_retention_common::kinds::KindSelection;
use kube_retention_runtime::LogFormat;

use clap::builder::TypedValueParser as _;
use kube_retention_io::breaker::Limit;
use kube_retention_io::initial_list::InitialList;

#[derive(Debug, Parser)]
#[command(
    name = crate::NAME,
    version,
    about = "Deletes finished Kubernetes objects on time, never the wrong one"
)]
pub struct Args {
    /// Client-side budget for writes (DELETE, PATCH, Events), requests per second; 0 = unlimited.
    #[arg(
        help_heading = "Deletions",
        long,
        env = "KUBE_RETENTION_QPS",
        default_value_t = 50
    )]
    pub qps: u32,
    /// Requests in flight at once.
    #[arg(
        help_heading = "Deletions",
        long,
        env = "KUBE_RETENTION_CONCURRENCY",
        default_value_t = 16
    )]
    pub concurrency: usize,
    /// How deleted objects' dependents go: Background, Foreground or Orphan.
    #[arg(help_heading = "Deletions", long, env = "KUBE_RETENTION_PROPAGATION_POLICY", value_enum, ignore_case = true, default_value_t = Propagation::Background)]
    pub propagation_policy: Propagation,
    /// Which `retention.dev/expires-at` stamps the controller writes itself: `never` (one request
    /// per deletion, the DELETE; the webhook still stamps at admission what it can, and
    /// `kubectl retention explain` and `upcoming` tell every deadline) or `finished` (also a
    /// finished object's deadline from its own settings, a PATCH each where the webhook could
    /// not stamp it at admission: the schedule on the object, for twice the writes).
    #[arg(help_heading = "Deletions", long, env = "KUBE_RETENTION_STAMP", value_enum, ignore_case = true, default_value_t = Stamp::Never)]
    pub stamp: Stamp,
    /// Events for deletions, on the parent where there is one: `off`, or the window within
    /// which deletions of one parent's runs (or of one kind in a namespace) share one Event
    /// ("Deleted 37 BuildRuns of Build hello"); `0s` records one Event per deletion. `on` is the
    /// default window.
    #[arg(help_heading = "Deletions", long, env = "KUBE_RETENTION_EVENTS", default_value = "5s", value_parser = parse_events)]
    pub events: Events,
    /// Each namespace's circuit breaker, `DELETIONS/WINDOW`: more DELETEs in one namespace than
    /// this within the window stop that namespace's deletions (only its own) until an admin
    /// releases it (`kubectl retention breaker release -n NAMESPACE`); `off` (or 0 deletions)
    /// turns it off.
    #[arg(help_heading = "Safety rails", long, env = "KUBE_RETENTION_CIRCUIT_BREAKER", default_value = "1000/10m", value_parser = parse_breaker)]
    pub circuit_breaker: Limit,
    /// The cluster's circuit breaker, `DELETIONS/WINDOW`: more DELETEs across every namespace
    /// than this within the window stop every deletion until an admin releases it (`kubectl
    /// retention breaker release`); `off` (or 0 deletions) turns it off.
    #[arg(help_heading = "Safety rails", long, env = "KUBE_RETENTION_CLUSTER_CIRCUIT_BREAKER", default_value = "10000/10m", value_parser = parse_breaker)]
    pub cluster_circuit_breaker: Limit,
    /// The blast-radius guard: a policy, new or changed, that would delete more objects than this
    /// at once deletes nothing until approved (`kubectl retention approve`), unless it sets its
    /// own `spec.safety.maxImmediateDeletions`; a Cleaner whose clean would delete more (its
    /// targets, a Helm release's objects and records) cleans nothing until its generation is
    /// approved. 0 turns the guard off.
    #[arg(
        help_heading = "Safety rails",
        long,
        env = "KUBE_RETENTION_MAX_IMMEDIATE_DELETIONS",
        default_value_t = 100
    )]
    pub max_immediate_deletions: u32,
    /// Watch a further kind: `GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED]`. Repeatable.
    #[arg(
        help_heading = "Kinds",
        long = "kind",
        env = "KUBE_RETENTION_KINDS",
        value_delimiter = ' '
    )]
    pub kinds: Vec<String>,
    /// Leave a built-in kind alone (neither watched nor deleted), by `Kind.group` name: `Pod`,
    /// `Job.batch`, `BuildRun.shipwright.io`, `Build.build.openshift.io`... Repeatable; for a
    /// cluster whose own pruning already owns that kind.
    #[arg(
        help_heading = "Kinds",
        long = "disable-kind",
        env = "KUBE_RETENTION_DISABLED_KINDS",
        value_delimiter = ' '
    )]
    pub disabled_kinds: Vec<String>,
    /// How often to look for further kinds whose annotated objects to delete (new CRDs, newly
    /// granted permissions); 0s turns annotated objects of other kinds off.
    #[arg(help_heading = "Kinds", long, env = "KUBE_RETENTION_DISCOVERY_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    pub discovery_interval: std::time::Duration,
    /// How long to wait at start for missing RBAC permissions (ClusterRole aggregation takes a
    /// moment) before failing with the list of what to grant.
    #[arg(help_heading = "Kinds", long, env = "KUBE_RETENTION_PERMISSIONS_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub permissions_timeout: std::time::Duration,
    /// The most objects tracked at once, every namespace's together (some 270 bytes each; raise
    /// it with the memory limit). At the bound the namespace holding the most goes without: its
    /// newest objects are left out, not deleted until there is room again, and one of its
    /// objects makes room for another namespace's (`kube_retention_objects_left_out_total`).
    #[arg(
        help_heading = "Kinds",
        long,
        env = "KUBE_RETENTION_MAX_TRACKED_OBJECTS",
        default_value_t = kube_retention_state::DEFAULT_MAX_TRACKED,
        value_parser = usize_in(1..)
    )]
    pub max_tracked_objects: usize,
    /// The most memory, in MiB, tenants' decoded objects may hold in the controller at once,
    /// every part's together: what its watches decode ahead of the loops, the objects on their
    /// way to the CEL evaluator, queued, under way and answered, and the Cleaners' targets
    /// (`kube_retention_object_memory_bytes`). A watch decodes an object only once it has room
    /// here, so tenants' objects slow the controller down rather than take its memory. At least
    /// 64: the Cleaners' targets hold up to 48, and one object up to 16.
    #[arg(
        help_heading = "Kinds",
        long,
        env = "KUBE_RETENTION_MAX_OBJECT_MEMORY",
        default_value_t = kube_retention_runtime::object_memory::DEFAULT_BYTES / (1024 * 1024),
        value_parser = usize_in(64..=65536)
    )]
    pub max_object_memory: usize,
    /// How each watch first lists its kind: `stream` (one watch request that sends every
    /// object, served from the API server's watch cache, with no continue token to expire on a
    /// long list) or `pages` (LISTs of 500 objects). `stream` falls back to pages where
    /// the API server refuses it (its WatchList feature gate off) or cuts it off.
    #[arg(
        help_heading = "Lists",
        long,
        env = "KUBE_RETENTION_INITIAL_LIST",
        value_enum,
        default_value = "stream"
    )]
    pub initial_list: InitialList,
    /// How many lists of objects run at once, the kinds' and the Cleaners' targets' together.
    /// Each list holds whole objects in memory (a page, or the events in flight of a streamed
    /// list) and loads the API server; the others wait their turn (a list that fails goes to
    /// the back of the line).
    #[arg(help_heading = "Lists", long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub list_concurrency: u32,
    /// The most a page of a paged list may weigh, in MiB, and its objects four times this
    /// decoded (weighed from its text before kube decodes it): a page past either is asked for
    /// again with half as many objects (down to one), so a namespace of large or dense objects
    /// cannot make one response the controller must hold. Lists take turns, so pages held at
    /// once weigh at most `--list-concurrency` times this, and their objects four times that.
    #[arg(
        help_heading = "Lists",
        long,
        env = "KUBE_RETENTION_LIST_PAGE_MEMORY",
        default_value_t = kube_retention_io::page_bytes::PAGE_BYTES / (1024 * 1024),
        value_parser = usize_in(1..=1024)
    )]
    pub list_page_memory: usize,
    /// Elect a leader among replicas with a coordination.k8s.io Lease; only the leader acts.
    #[arg(help_heading = "Leader election", long, env = "KUBE_RETENTION_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    #[arg(
        help_heading = "Leader election",
        long,
        env = "KUBE_RETENTION_LEASE_NAME",
        default_value = crate::NAME
    )]
    pub lease_name: String,
    #[arg(
        help_heading = "Leader election",
        long,
        env = "POD_NAMESPACE",
        default_value = "kube-retention"
    )]
    pub lease_namespace: String,
    /// This replica's identity in the Lease (default: the pod name, else the host name).
    #[arg(help_heading = "Leader election", long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Seconds a leader's Lease is valid without renewal (a crashed leader's successor waits this
    /// long; a leader that stops cleanly releases it at once).
    #[arg(help_heading = "Leader election", long, default_value_t = 15)]
    pub lease_duration: u64,
    /// Run Cleaners (retention.dev/v1alpha1): groups deleted together when their conditions hold.
    #[arg(help_heading = "Cleaners and CloudEvents", long, env = "KUBE_RETENTION_CLEANERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub cleaners: bool,
    #[command(flatten, next_help_heading = "Cleaners and CloudEvents")]
    pub sink_policy: kube_retention_runtime::SinkPolicyFlags,
    /// The deletion ledger's cluster-wide sink: every deletion the controller makes (policies,
    /// annotations, fields, limits, Cleaners) is announced there as a CloudEvent
    /// `dev.retention.deleted`, and every notice as `dev.retention.expiring`, beside each
    /// policy's own `spec.sink`. The sink policy applies to it as to any sink.
    #[arg(
        help_heading = "Cleaners and CloudEvents",
        long,
        env = "KUBE_RETENTION_LEDGER_SINK"
    )]
    pub ledger_sink: Option<String>,
    /// CloudEvents held for delivery at most, waiting or under way, in each of two sets of
    /// queues: the tenants' (policies' sinks, Cleaners') and the admin's (`--ledger-sink`), which
    /// share nothing. Beyond it the oldest of the longest queue (a namespace's for a sink) is
    /// dropped and counted (`kube_retention_ledger_events_dropped_total`). Policies with
    /// `archiveBeforeDelete` never lose one: their objects wait instead.
    #[arg(
        help_heading = "Cleaners and CloudEvents",
        long,
        env = "KUBE_RETENTION_LEDGER_QUEUE",
        default_value_t = 10_000
    )]
    pub ledger_queue: usize,
    /// This pod's IP (the downward API's status.podIP): CloudEvents may not be sent to it.
    #[arg(help_heading = "Cleaners and CloudEvents", long, env = "POD_IP")]
    pub pod_ip: Option<std::net::IpAddr>,
    /// Address for /metrics, /healthz and /readyz (plain HTTP).
    #[arg(
        help_heading = "Process",
        long,
        env = "KUBE_RETENTION_METRICS_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_address: SocketAddr,
    /// Kubeconfig (default: in-cluster, then $KUBECONFIG).
    #[arg(help_heading = "Process", long, env = "KUBE_RETENTION_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The address space of the process tenants' CEL runs in, in MiB: the operating system's
    /// bound on it, whatever an expression does (the container's memory limit must cover it and
    /// the controller's own).
    #[arg(
        help_heading = "Process",
        long,
        env = "KUBE_RETENTION_EVALUATOR_MEMORY",
        default_value_t = kube_retention_evaluator::sandbox::limits::DEFAULT_MEMORY / (1024 * 1024),
        value_parser = clap::value_parser!(u64).range(64..)
    )]
    pub evaluator_memory: u64,
    #[arg(help_heading = "Process", long, env = "KUBE_RETENTION_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

impl Args {
    /// `--kind` and `--disable-kind`, as the registry and the Lease take them.
    pub fn kind_selection(&self) -> KindSelection {
        KindSelection {
            kinds: self.kinds.clone(),
            disabled_kinds: self.disabled_kinds.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stamp {
    Finished,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// A whole number within `range`, taken as the `usize` the parts count in (a count, or MiB):
/// `--max-tracked-objects`, `--max-object-memory`, `--list-page-memory`.
fn usize_in(
    range: impl std::ops::RangeBounds<u64>,
) -> impl clap::builder::TypedValueParser<Value = usize> {
    clap::value_parser!(u64)
        .range(range)
        .map(|number| usize::try_from(number).unwrap_or(usize::MAX))
}

/// `--events`: none, or the window within which deletions share one Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events {
    Off,
    Within(std::time::Duration),
}

/// The window `--events=on` means.
const EVENT_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

fn parse_events(text: &str) -> Result<Events, String> {
    match text.to_ascii_lowercase().as_str() {
        "off" | "false" => Ok(Events::Off),
        "on" | "true" => Ok(Events::Within(EVENT_WINDOW)),
        _ => humantime::parse_duration(text)
            .map(Events::Within)
            .map_err(|error| {
                format!(
                    "{error}: expected off, on, or a window such as 5s (0s: an Event per deletion)"
                )
            }),
    }
}

/// `--circuit-breaker`, `--cluster-circuit-breaker`: more DELETEs than `deletions` within
/// `window` open it (0: off).
fn parse_breaker(text: &str) -> Result<Limit, String> {
    const EXPECTED: &str = "expected DELETIONS/WINDOW such as 10000/10m, or off";
    if text.eq_ignore_ascii_case("off") {
        return Ok(Limit::OFF);
    }
    let (deletions, window) = text.split_once('/').ok_or(EXPECTED)?;
    let deletions = deletions
        .trim()
        .parse()
        .map_err(|error| format!("deletions {deletions:?}: {error}; {EXPECTED}"))?;
    let text = window;
    let window = humantime::parse_duration(text.trim())
        .map_err(|error| format!("window {text:?}: {error}; {EXPECTED}"))?;
    if deletions > 0 && window.is_zero() {
        return Err(format!(
            "window {text:?}: a window of zero counts nothing; {EXPECTED}"
        ));
    }
    Ok(Limit { deletions, window })
}
