//! Kyverno's cleanup controller, the peer admins install for cleanup, as `make bench-peers` runs
//! it: the release pinned in `bench/peers/kyverno/go.mod`, built by `bench/peers/build.sh`, as a
//! host process against the benchmark's cluster the way Kyverno's own debug launcher runs it out
//! of cluster (`--kubeconfig`, `--serverIP`), with the CRDs it waits for and its chart's RBAC
//! (`bench/peers/kyverno/rbac.yaml`) under a client identity of its own, so the audit log tells
//! its requests apart. Two ways of its to say how long a finished Job lives, each a deleter of
//! its own:
//!
//! - the `cleanup.kyverno.io/ttl` label: the benchmark labels each Job, as it finishes, with the
//!   absolute time it expires (the label's `2006-01-02T150405Z` form; a duration would count
//!   from creation, not from finishing); Kyverno watches labelled objects and deletes each at
//!   its time;
//! - a `DeletingPolicy` (CEL, `policies.kyverno.io/v1`) per namespace on the finest schedule its
//!   documentation gives, every minute, deleting the Jobs whose completion is older than the TTL.
//!
//! Both delete with background propagation (the label's `cleanup.kyverno.io/propagation-policy`
//! annotation, the policy's `deletionPropagationPolicy`), as kube-retention does.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use jiff::Timestamp;
use kube_retention_e2e::process::{self, Tracked};
use kube_retention_e2e::{LocalCluster, run, run_with_input};

/// Its client identity (a client certificate's user, in no group), and its process's name.
pub const USER: &str = "kyverno-cleanup-controller";
/// The namespace it runs in: its lease, its certificates and its configuration's place.
const NAMESPACE: &str = "kyverno";
/// The label whose value is an object's time to go.
pub const TTL_LABEL: &str = "cleanup.kyverno.io/ttl";
/// The annotation that sets the propagation of a label's deletion.
pub const PROPAGATION_ANNOTATION: &str = "cleanup.kyverno.io/propagation-policy";
/// The DeletingPolicy's schedule: every minute, the finest its documentation gives ("Minimum
/// granularity is 1 minute").
pub const SCHEDULE: &str = "*/1 * * * *";
/// How often it looks for kinds carrying the TTL label (`--ttlReconciliationInterval`, 1m by
/// default): its first look comes one interval after it leads, and deletions follow it; each
/// look is a discovery and a permission check ([`REVIEWS_PER_CHECK`] access reviews) per kind.
pub const TTL_RECONCILIATION_INTERVAL: Duration = Duration::from_secs(10);
/// The webhook configurations it registers as leader; left behind when it stops, so removed.
const WEBHOOKS: [&str; 2] = [
    "kyverno-cleanup-validating-webhook-cfg",
    "kyverno-ttl-validating-webhook-cfg",
];
/// Its certificates' Secrets, named as its chart names them.
const CA_SECRET: &str = "kyverno-cleanup-controller.kyverno.svc.kyverno-tls-ca";
const TLS_SECRET: &str = "kyverno-cleanup-controller.kyverno.svc.kyverno-tls-pair";

/// Where `bench/peers/build.sh` puts what it builds.
fn peers_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/bin")
}

/// Its release, as `bench/peers/kyverno/go.mod` pins it.
pub fn version() -> Result<String> {
    let go_mod = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/kyverno/go.mod");
    let text = std::fs::read_to_string(&go_mod)
        .with_context(|| format!("reading {}", go_mod.display()))?;
    text.lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("require github.com/kyverno/kyverno ")
        })
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "{} requires no github.com/kyverno/kyverno",
                go_mod.display()
            )
        })
}

/// Installs what it needs once per cluster: its CRDs, its namespace and RBAC, its kubeconfig.
pub fn install(cluster: &LocalCluster) -> Result<()> {
    let binary = peers_bin().join(USER);
    if !binary.exists() {
        bail!("{} is missing: run bench/peers/build.sh", binary.display());
    }
    let crds = peers_bin().join("kyverno-crds");
    run(cluster
        .kubectl()
        .args(["apply", "--server-side", "-f"])
        .arg(crds))?;
    run(cluster.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd",
        "--all",
    ]))?;
    let rbac = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/kyverno/rbac.yaml");
    run(cluster.kubectl().arg("apply").arg("-f").arg(rbac))?;
    crate::kubeconfigs::write_kubeconfig(cluster, USER, "kyverno.kubeconfig", &[])
}

/// The metric its TTL manager exposes for each kind it watches for the label, once it has
/// listed that kind's labelled objects.
const TTL_WATCHING_METRIC: &str = "kyverno_ttl_controller_info{";

/// Starts it with `budget` requests per second for each of its clients (`None`: unlimited),
/// and waits until it leads: its webhooks registered; for the TTL label (`labels`), also until
/// its TTL manager watches Jobs, which it first looks for one interval after it leads.
pub fn start(cluster: &LocalCluster, budget: Option<u32>, labels: bool) -> Result<Tracked> {
    let [server_port, metrics_port] = kube_retention_e2e::cluster::free_ports::<2>()?;
    // client-go's limiter: qps with an equal burst, like governor's per-second quota.
    let qps = budget.unwrap_or(1_000_000);
    let tracked = process::spawn(
        &cluster.layout.state_dir,
        USER,
        Command::new(peers_bin().join(USER))
            // All six must be set, or it exits; the two ConfigMaps may be absent (defaults, no
            // resource filters). A stable pod name takes its lease back at once.
            .env("KYVERNO_NAMESPACE", NAMESPACE)
            .env("KYVERNO_SERVICEACCOUNT_NAME", USER)
            .env("KYVERNO_DEPLOYMENT", USER)
            .env("KYVERNO_POD_NAME", format!("{USER}-0"))
            .env("KYVERNO_SVC", USER)
            .env("INIT_CONFIG", "kyverno")
            .env("METRICS_CONFIG", "kyverno-metrics")
            .arg(format!(
                "--kubeconfig={}",
                cluster.layout.state("kyverno.kubeconfig").display()
            ))
            .arg(format!("--serverIP=127.0.0.1:{server_port}"))
            .arg("--cleanupServerHost=127.0.0.1")
            .arg(format!("--cleanupServerPort={server_port}"))
            .arg(format!("--caSecretName={CA_SECRET}"))
            .arg(format!("--tlsSecretName={TLS_SECRET}"))
            .arg("--metricsHost=127.0.0.1")
            .arg(format!("--metricsPort={metrics_port}"))
            .arg(format!(
                "--ttlReconciliationInterval={}s",
                TTL_RECONCILIATION_INTERVAL.as_secs()
            ))
            .arg(format!("--clientRateLimitQPS={qps}"))
            .arg(format!("--clientRateLimitBurst={qps}"))
            .stdin(Stdio::null()),
    )
    .context("starting Kyverno's cleanup controller")?;
    let started = Instant::now();
    while !WEBHOOKS.iter().all(|webhook| {
        run(cluster
            .kubectl()
            .args(["get", "validatingwebhookconfiguration", webhook]))
        .is_ok()
    }) {
        if crate::live_pid(&tracked).is_none() {
            bail!("Kyverno's cleanup controller exited at start: see its log, {USER}.log");
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("Kyverno's cleanup controller registered no webhooks in 2 minutes");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    if labels {
        wait_watching_jobs(&tracked, metrics_port)?;
    }
    Ok(tracked)
}

/// Waits until its TTL manager says, on its metrics, that it watches Jobs for the label (their
/// labelled objects listed): deletions by label follow from then on.
fn wait_watching_jobs(tracked: &Tracked, metrics_port: u16) -> Result<()> {
    let started = Instant::now();
    // Its first look, and its list of every labelled Job: minutes at 100,000.
    let limit = TTL_RECONCILIATION_INTERVAL * 3 + Duration::from_secs(300);
    loop {
        let metrics =
            kube_retention_e2e::components::http_get(metrics_port, "/metrics").unwrap_or_default();
        if watches_jobs(&metrics) {
            return Ok(());
        }
        if crate::live_pid(tracked).is_none() {
            bail!("Kyverno's cleanup controller exited before watching Jobs: see {USER}.log");
        }
        if started.elapsed() > limit {
            bail!(
                "Kyverno's TTL manager did not watch Jobs within {limit:?}: its metrics have no \
                 kyverno_ttl_controller_info series for batch/jobs"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whether its metrics' text has the TTL manager watching Jobs.
fn watches_jobs(metrics: &str) -> bool {
    metrics.lines().any(|line| {
        line.starts_with(TTL_WATCHING_METRIC)
            && line.contains("resource_group=\"batch\"")
            && line.contains("resource_resource=\"jobs\"")
    })
}

/// Removes the webhook configurations it registered: they outlive it, and the one for its
/// policies fails every write of one while it is down.
pub fn remove_webhooks(cluster: &LocalCluster) -> Result<()> {
    run(cluster
        .kubectl()
        .args([
            "delete",
            "--ignore-not-found",
            "validatingwebhookconfiguration",
        ])
        .args(WEBHOOKS))?;
    Ok(())
}

/// The access reviews one of its permission checks on a kind sends, through its client and so
/// under that client's budget: a SelfSubjectAccessReview per verb it needs (`watch`, `list`,
/// `delete`). Its TTL webhook checks so for each labelled object it admits, and its TTL
/// manager for every kind at each look.
pub const REVIEWS_PER_CHECK: u32 = 3;

/// Seconds to finish `jobs` Jobs and label each for Kyverno before their expiry, at `budget`
/// requests a second for each of its clients (`None`: unlimited): every label passes its TTL
/// webhook, which first checks its permissions, [`REVIEWS_PER_CHECK`] access reviews under that
/// budget (1,000 labels took 61.5 s here at 50 a second); unlimited, the webhook's round trip
/// sets the pace (a hundredth of a second a Job at most: 1,000 took 4.7 s here, at the
/// benchmark's 32 requests in flight). A second more per 500 Jobs to finish them, and 15 s and a
/// twentieth of the reviewing to spare (10,000 labels took 627 s at 50 a second, 8 s short of
/// 15 s to spare).
pub fn labelling_time(jobs: usize, budget: Option<u32>) -> u32 {
    let jobs = u64::try_from(jobs).unwrap_or(u64::MAX);
    let reviewing = match budget {
        Some(per_second) => {
            (jobs * u64::from(REVIEWS_PER_CHECK)).div_ceil(u64::from(per_second.max(1)))
        }
        None => jobs.div_ceil(100),
    };
    let spare = 15 + reviewing.div_ceil(20);
    u32::try_from(jobs.div_ceil(500) + reviewing + spare).unwrap_or(u32::MAX)
}

/// The TTL label's value for `expiry`: an absolute time without colons, which label values
/// cannot hold.
pub fn ttl_label_value(expiry: Timestamp) -> String {
    expiry.strftime("%Y-%m-%dT%H%M%SZ").to_string()
}

/// A DeletingPolicy deleting the Jobs of `namespace` whose completion (or failure) is `ttl`
/// seconds old, every minute.
fn deleting_policy(namespace: &str, ttl: u32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "DeletingPolicy",
        "metadata": {"name": policy_name(namespace)},
        "spec": {
            "schedule": SCHEDULE,
            "deletionPropagationPolicy": "Background",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"],
                    "operations": ["*"]
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
            "conditions": [{
                "name": "finished-long-enough",
                "expression": format!(
                    "has(object.status) && has(object.status.conditions) && \
                     object.status.conditions.exists(c, (c.type == 'Complete' || c.type == 'Failed') \
                     && c.status == 'True' \
                     && time.now() - timestamp(c.lastTransitionTime) >= duration('{ttl}s'))"
                )
            }]
        }
    })
}

/// The name of the DeletingPolicy of `namespace`'s Jobs.
fn policy_name(namespace: &str) -> String {
    format!("finished-jobs-{namespace}")
}

/// The DeletingPolicy of one namespace's Jobs, there while this is held: deleted by
/// [`DeletingPolicy::remove`] once the Jobs are gone, or on drop should a run end early, so no
/// run's policy lists another's Jobs.
pub struct DeletingPolicy {
    cluster: LocalCluster,
    /// `None` once removed.
    namespace: Option<String>,
}

impl DeletingPolicy {
    /// Applies, as the admin, the policy deleting the Jobs of `namespace` `ttl` seconds after
    /// they finish (`deleting_policy`).
    pub fn apply(cluster: &LocalCluster, namespace: &str, ttl: u32) -> Result<Self> {
        run_with_input(
            cluster.kubectl().args(["apply", "-f", "-"]),
            &deleting_policy(namespace, ttl).to_string(),
        )?;
        Ok(Self {
            cluster: cluster.clone(),
            namespace: Some(namespace.to_owned()),
        })
    }

    /// Deletes it.
    pub fn remove(mut self) -> Result<()> {
        self.delete()
    }

    fn delete(&mut self) -> Result<()> {
        let Some(namespace) = self.namespace.take() else {
            return Ok(());
        };
        run(self
            .cluster
            .kubectl()
            .args(["delete", "deletingpolicies.policies.kyverno.io"])
            .arg(policy_name(&namespace)))?;
        Ok(())
    }
}

impl Drop for DeletingPolicy {
    fn drop(&mut self) {
        if let Err(error) = self.delete() {
            eprintln!("deleting Kyverno's DeletingPolicy: {error:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ttl_label_holds_the_expiry_in_the_form_kyverno_parses_without_colons() {
        let expiry: Timestamp = "2026-11-28T22:05:09Z".parse().unwrap();
        assert_eq!(ttl_label_value(expiry), "2026-11-28T220509Z");
    }

    #[test]
    fn the_deleting_policy_matches_one_namespace_s_jobs_finished_the_ttl_ago() {
        let policy = deleting_policy("bench-0-kyverno-policy", 10);
        assert_eq!(
            policy["metadata"]["name"],
            "finished-jobs-bench-0-kyverno-policy"
        );
        assert_eq!(policy["spec"]["schedule"], SCHEDULE);
        assert_eq!(
            policy["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "bench-0-kyverno-policy"
        );
        assert_eq!(
            policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"][0],
            "jobs"
        );
        let condition = policy["spec"]["conditions"][0]["expression"]
            .as_str()
            .unwrap();
        assert!(condition.contains("duration('10s')"), "{condition}");
        assert!(condition.contains("c.type == 'Complete'"), "{condition}");
    }

    #[test]
    fn it_watches_jobs_once_its_ttl_metric_names_them() {
        let before = "# TYPE kyverno_ttl_controller_info gauge\n\
            kyverno_ttl_controller_info{resource_group=\"\",resource_resource=\"pods\",resource_version=\"v1\"} 1\n";
        assert!(!watches_jobs(before));
        let after = format!(
            "{before}kyverno_ttl_controller_info{{otel_scope_name=\"kyverno\",resource_group=\"batch\",\
             resource_resource=\"jobs\",resource_version=\"v1\"}} 1\n"
        );
        assert!(watches_jobs(&after));
        assert!(!watches_jobs(
            "kyverno_ttl_controller_deletedobjects_total{resource_group=\"batch\",resource_resource=\"jobs\"} 3"
        ));
    }

    #[test]
    fn labelling_leaves_time_for_each_label_s_access_reviews_at_the_budget() {
        // 3,000 reviews at 50 a second, 2 s of finishing, 15 s and a twentieth to spare.
        assert_eq!(labelling_time(1_000, Some(50)), 60 + 2 + 15 + 3);
        assert_eq!(labelling_time(1_000, None), 10 + 2 + 15 + 1);
        assert_eq!(labelling_time(10_000, Some(50)), 600 + 20 + 15 + 30);
    }

    #[test]
    fn its_version_is_the_one_its_module_pins() {
        assert_eq!(version().unwrap(), "v1.19.1");
    }
}
