//! The hostile tenant's further attacks, beside its policy and its Cleaners' sinks: a Cleaner
//! whose monotonic search runs sixteen loops over its Jobs at each of its points, woken again
//! by every edit to them (the search that once held the Cleaners' loop for seconds); a Cleaner
//! over every ConfigMap of its namespace, one of them a megabyte (what once made the controller
//! watch and hold every namespace's ConfigMaps); a Cleaner whose condition runs past its limit
//! on A's Jobs (it must say so, `Ready=False`); and, while it is hostile, a stream of Cleaners
//! of sixteen 4 KB conditions each sent to the webhook (dry run: compiled, never stored).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_retention_common::cleaner::Cleaner;
use serde_json::{Value, json};

use kube_retention_e2e::components::{CONTROLLER, WEBHOOK};
use kube_retention_e2e::process::{Tracked, tracked};
use nix::unistd::Pid;

use crate::cleaners::create_cleaner;
use crate::support::TestNamespace;
use crate::workloads::eventually;

/// The searching Cleaner, the one over the namespace's ConfigMaps, and one whose condition
/// admission lets through on the sizes it assumes but A's Jobs are built to exceed.
pub const CLEANERS: [&str; 3] = ["search", "config-maps", "costly"];

/// Two loops over one Job's annotations: within the limit as estimated, three times over it
/// on A's Jobs of 700.
const COSTLY: &str = "jobs.items[0].metadata.annotations.all(a, \
                      jobs.items[0].metadata.annotations.exists(b, b == a))";
/// The ConfigMap of a megabyte.
const BIG: &str = "megabyte";

/// Sixteen conditions, each a loop over the Jobs (two loops, over their annotations too, would
/// be refused at admission: estimated at 52 million), that all turn true half an hour after
/// `now`: a monotonic search over an hour's period evaluates them at some twenty points.
fn search_conditions(now: jiff::Timestamp) -> Vec<String> {
    let turns = now + jiff::SignedDuration::from_mins(30);
    (0..16)
        .map(|n| {
            format!(
                "jobs.items.all(j, j.metadata.name.startsWith('heavy-') \
                 && j.metadata.annotations.size() > {n}) && time > timestamp('{turns}')"
            )
        })
        .collect()
}

pub async fn add(tenant: &TestNamespace) -> Result<()> {
    let data = json!({"data": {"filler": "x".repeat(1_000_000)}});
    let mut big: ConfigMap = serde_json::from_value(data)?;
    big.metadata.name = Some(BIG.to_owned());
    Api::<ConfigMap>::namespaced(tenant.env.client.clone(), &tenant.name)
        .create(&PostParams::default(), &big)
        .await?;
    let search = json!({
        "retry": {"period": "1h", "monotonic": true},
        "targets": [{"name": "jobs", "includeWhenEvaluating": true,
                     "reference": {"apiGroup": "batch", "version": "v1", "kind": "Job"}}],
        "conditions": search_conditions(jiff::Timestamp::now()),
    });
    create_cleaner(tenant, CLEANERS[0], search).await?;
    let config_maps = json!({
        "retry": {"period": "1h"},
        "targets": [{"name": "maps", "includeWhenEvaluating": true,
                     "reference": {"version": "v1", "kind": "ConfigMap"}}],
        "conditions": ["maps.items.all(m, m.metadata.name.size() < 0)"],
    });
    create_cleaner(tenant, CLEANERS[1], config_maps).await?;
    let costly = json!({
        "retry": {"period": "1h"},
        "targets": [{"name": "jobs", "includeWhenEvaluating": true,
                     "reference": {"apiGroup": "batch", "version": "v1", "kind": "Job"}}],
        "conditions": [COSTLY],
    });
    create_cleaner(tenant, CLEANERS[2], costly).await?;
    Ok(())
}

/// Waits for the costly Cleaner to say `Ready=False`, `CostLimitExceeded`, and answers its
/// message.
pub async fn costly_stopped_at_its_limit(tenant: &TestNamespace) -> Result<String> {
    let cleaners: Api<Cleaner> = Api::namespaced(tenant.env.client.clone(), &tenant.name);
    let ready = || async {
        let cleaner = cleaners.get(CLEANERS[2]).await?;
        anyhow::Ok(crate::cleaners::condition(&cleaner, "Ready"))
    };
    eventually(
        super::tenant::A_SAYS_WITHIN,
        "the costly Cleaner Ready=False, CostLimitExceeded",
        || async {
            Ok(ready().await?.is_some_and(|(status, reason, _)| {
                status == "False" && reason == "CostLimitExceeded"
            }))
        },
    )
    .await?;
    Ok(ready()
        .await?
        .map(|(_, _, message)| message)
        .unwrap_or_default())
}

pub async fn remove(tenant: &TestNamespace) -> Result<()> {
    let cleaners: Api<Cleaner> = Api::namespaced(tenant.env.client.clone(), &tenant.name);
    for name in CLEANERS {
        cleaners.delete(name, &DeleteParams::default()).await.ok();
    }
    Api::<ConfigMap>::namespaced(tenant.env.client.clone(), &tenant.name)
        .delete(BIG, &DeleteParams::default())
        .await
        .ok();
    Ok(())
}

/// A condition of about 4 KB that admission lets through: within 1,024 tokens (long string
/// literals compared, four tokens a term), a cheap estimate.
fn long_condition(n: usize) -> String {
    let mut condition = format!("jobs.items.size() > {n}");
    let term = format!(" || '{}' == 'b'", "a".repeat(40));
    while condition.len() + term.len() < 4_000 {
        condition.push_str(&term);
    }
    condition
}

/// What the webhook made of the Cleaners sent to it.
#[derive(Default)]
pub struct Flood {
    /// Admitted (dry run: compiled, judged, not stored).
    pub admitted: AtomicUsize,
    /// Refused uncompiled: A had used its share of the webhook's compile time.
    pub throttled: AtomicUsize,
    /// Refused by the webhook otherwise, which had to read them to say why.
    pub refused: AtomicUsize,
    /// The first answer that was neither: the webhook not reached, or the API server's own.
    pub other: std::sync::Mutex<Option<String>>,
    /// The first refusal, for a failure to quote.
    pub first_refusal: std::sync::Mutex<Option<String>>,
}

/// Sends Cleaners of sixteen 4 KB conditions to the webhook, dry run, one after another (a
/// tenth of a second apart, at most ten a second) until aborted, taking every refusal as it
/// comes, and counts what it made of them: a burst compiled, then most refused uncompiled once
/// A has used its share of the compile time.
pub async fn flood_webhook(tenant: TestNamespace, flood: Arc<Flood>) {
    let client = match tenant.env.impatient_client().await {
        Ok(client) => client,
        Err(error) => {
            let mut other = flood
                .other
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            other.get_or_insert(format!("{error:#}"));
            return;
        }
    };
    let cleaners: Api<Cleaner> = Api::namespaced(client, &tenant.name);
    let conditions: Vec<String> = (0..16).map(long_condition).collect();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for n in 0.. {
        let cleaner = serde_json::from_value::<Cleaner>(json!({
            "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
            "metadata": {"name": format!("flood-{n}")},
            "spec": {"targets": [{"name": "jobs", "includeWhenEvaluating": true,
                                  "reference": {"apiGroup": "batch", "version": "v1",
                                                "kind": "Job"}}],
                     "conditions": Value::from(conditions.clone())}}));
        let answer = match cleaner {
            Ok(cleaner) => cleaners.create(&dry_run, &cleaner).await.map(|_| ()),
            Err(error) => {
                flood
                    .other
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .get_or_insert(error.to_string());
                return;
            }
        };
        match answer {
            Ok(()) => {
                flood.admitted.fetch_add(1, Ordering::Relaxed);
            }
            Err(kube::Error::Api(status))
                if status.code == 429 && status.message.contains("used its share") =>
            {
                flood.throttled.fetch_add(1, Ordering::Relaxed);
            }
            Err(kube::Error::Api(status)) if status.message.contains("admission webhook") => {
                flood.refused.fetch_add(1, Ordering::Relaxed);
                let mut first = flood
                    .first_refusal
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                first.get_or_insert(status.message);
            }
            Err(error) => {
                let mut other = flood
                    .other
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                other.get_or_insert(error.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A's requests of the same size and pace as [`flood_webhook`]'s, which kube-retention never
/// sees: ConfigMaps holding the same sixteen 4 KB strings, dry run, one after another (a tenth of
/// a second apart) until aborted, counted in `sent` (and failures in `failed`). What A's
/// workload costs B through the API server the tenants share, whoever answers A.
pub async fn flood_api_server(
    tenant: TestNamespace,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
) {
    let Ok(client) = tenant.env.impatient_client().await else {
        failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &tenant.name);
    let data: serde_json::Map<String, Value> = (0..16)
        .map(|n| (format!("c{n}"), Value::from(long_condition(n))))
        .collect();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for n in 0.. {
        let config_map = serde_json::from_value::<ConfigMap>(json!({
            "metadata": {"name": format!("flood-{n}")}, "data": data.clone()}));
        let answer = match config_map {
            Ok(config_map) => config_maps.create(&dry_run, &config_map).await.is_ok(),
            Err(_) => false,
        };
        let counter = if answer { &sent } else { &failed };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The chart's memory limits: the controller's and the webhook's.
pub const CONTROLLER_LIMIT_KIB: u64 = 256 * 1024;
pub const WEBHOOK_LIMIT_KIB: u64 = 128 * 1024;

/// kube-retention's processes as the scenario began, to tell afterwards whether either
/// restarted and the most memory each held.
pub struct Processes {
    controller: (Tracked, Option<Pid>),
    webhook: (Tracked, Option<Pid>),
}

/// What the processes did meanwhile.
pub struct Held {
    pub restarts: usize,
    pub controller_kib: u64,
    pub webhook_kib: u64,
}

impl Processes {
    pub fn start(ns: &TestNamespace) -> Self {
        let state_dir = &ns.env.cluster.layout.state_dir;
        let mut tracked = tracked(state_dir, &[CONTROLLER, WEBHOOK]).into_iter();
        let mut now = || {
            let process = tracked.next().expect("both are tracked");
            let pid = process.live_pid();
            (process, pid)
        };
        Self {
            controller: now(),
            webhook: now(),
        }
    }

    /// Restarts since [`Processes::start`] (a process not running, or running under another
    /// pid), and each one's peak resident set since it started (`VmHWM`: at least this
    /// scenario's).
    pub fn held(&self) -> Held {
        let restarted = |(process, pid): &(Tracked, Option<Pid>)| {
            usize::from(pid.is_none() || process.live_pid() != *pid)
        };
        let peak = |(process, _): &(Tracked, Option<Pid>)| process.peak_rss_kib().unwrap_or(0);
        Held {
            restarts: restarted(&self.controller) + restarted(&self.webhook),
            controller_kib: peak(&self.controller),
            webhook_kib: peak(&self.webhook),
        }
    }
}
