//! Policies at scale: objects spread over kinds defined here (custom resources with no
//! annotations, unfinished) under one ClusterRetentionPolicy naming every kind; kube-retention's
//! controller starts fresh and the benchmark measures how long until the policy's status counts
//! every object, its RSS (current and peak, so the listing peak is in), and then what a change
//! of the policy costs: requests the controller sent (from the audit log) and the time until the
//! status shows the new generation governing every object again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_retention_e2e::LocalCluster;
use serde_json::{Value, json};

use crate::deleters::{self, Deleter, Work};

const GROUP: &str = "bench.retention.dev";
const NAMESPACE: &str = "bench-policies";
const POLICY: &str = "bench";
const CONCURRENCY: usize = 32;

pub struct Figures {
    pub objects: usize,
    pub kinds: usize,
    /// From the controller's start until the status counted every object.
    pub governing_after: Duration,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
    /// From the change until the status showed the new generation governing every object.
    pub change_after: Duration,
    /// The controller's requests after the change, by verb and resource.
    pub change_requests: BTreeMap<String, usize>,
}

fn kind(index: usize) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1", &format!("Gadget{index}")),
        &format!("gadget{index}s"),
    )
}

fn apply(cluster: &LocalCluster, manifest: &Value) -> Result<()> {
    kube_retention_e2e::run_with_input(
        cluster.kubectl().args(["apply", "-f", "-"]),
        &manifest.to_string(),
    )?;
    Ok(())
}

/// Defines `kinds` namespaced kinds and lets the controller delete them (an aggregated role).
fn define(cluster: &LocalCluster, kinds: usize) -> Result<()> {
    for index in 0..kinds {
        let resource = kind(index);
        apply(
            cluster,
            &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{}.{GROUP}", resource.plural)},
                "spec": {"group": GROUP, "scope": "Namespaced",
                         "names": {"kind": resource.kind, "plural": resource.plural},
                         "versions": [{"name": "v1", "served": true, "storage": true,
                                       "subresources": {"status": {}},
                                       "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        )?;
        kube_retention_e2e::run(cluster.kubectl().args([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{}.{GROUP}", resource.plural),
        ]))?;
    }
    apply(
        cluster,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "bench-retention-gadgets",
                         "labels": {"retention.dev/aggregate-to-controller": "true"}},
            "rules": [{"apiGroups": [GROUP], "resources": ["*"],
                       "verbs": ["list", "watch", "patch", "delete"]}]}),
    )
}

async fn create(client: &Client, objects: usize, kinds: usize) -> Result<()> {
    create_in(client, NAMESPACE, objects, kinds, false).await
}

/// Creates `objects` objects in `namespace`, spread over `kinds`; `labelled`, each carries
/// the label the one-label policy reads.
async fn create_in(
    client: &Client,
    namespace: &str,
    objects: usize,
    kinds: usize,
    labelled: bool,
) -> Result<()> {
    stream::iter(0..objects)
        .map(|index| {
            let resource = kind(index % kinds);
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &resource);
            async move {
                let mut object = DynamicObject::new(&format!("g-{index:06}"), &resource);
                if labelled {
                    object.metadata.labels = Some([("tier".into(), "batch".into())].into());
                }
                object.data = json!({"spec": {"size": index}});
                api.create(&PostParams::default(), &object).await?;
                Ok::<(), anyhow::Error>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn policy(kinds: usize, ttl: &str) -> Value {
    let resources: Vec<Value> = (0..kinds)
        .map(|index| json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind(index).kind}))
        .collect();
    json!({"apiVersion": "retention.dev/v1alpha1", "kind": "ClusterRetentionPolicy",
           "metadata": {"name": POLICY},
           "spec": {"resources": resources, "ttlAfterSucceeded": ttl, "succeededLimit": 100}})
}

/// Waits until the policy's status shows generation `generation` governing `objects`.
async fn governing(
    client: &Client,
    objects: usize,
    generation: i64,
    since: Instant,
) -> Result<Duration> {
    let policies: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("retention.dev", "v1alpha1", "ClusterRetentionPolicy"),
            "clusterretentionpolicies",
        ),
    );
    loop {
        let status = policies.get(POLICY).await?.data["status"].clone();
        let ready = status["conditions"][0]["status"] == "True";
        if ready && status["matched"] == objects && status["observedGeneration"] == generation {
            return Ok(since.elapsed());
        }
        ensure!(
            since.elapsed() < Duration::from_secs(1200),
            "not governing: {status}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The controller's requests in the audit log after `offset`, by verb and resource.
fn requests(cluster: &LocalCluster, offset: usize) -> Result<BTreeMap<String, usize>> {
    let log = std::fs::read(cluster.layout.audit_log())?;
    let user = Deleter::KubeRetention.user();
    let mut counts = BTreeMap::new();
    for line in log[offset.min(log.len())..].split(|byte| *byte == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let verb = event["verb"].as_str().unwrap_or("-");
        // A watch is counted when it starts; every other request once, when answered.
        let stage = if verb == "watch" {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        if event["user"]["username"] != user.as_str() || event["stage"] != stage {
            continue;
        }
        let resource = event["objectRef"]["resource"].as_str().unwrap_or("-");
        let subresource = event["objectRef"]["subresource"]
            .as_str()
            .map_or(String::new(), |sub| format!("/{sub}"));
        *counts
            .entry(format!("{verb} {resource}{subresource}"))
            .or_default() += 1;
    }
    Ok(counts)
}

pub async fn measure(
    cluster: &LocalCluster,
    client: &Client,
    objects: usize,
    kinds: usize,
    metrics_port: u16,
) -> Result<Figures> {
    crate::namespace(client, NAMESPACE).await?;
    define(cluster, kinds)?;
    println!("creating {objects} objects over {kinds} kinds");
    create(client, objects, kinds).await?;
    apply(cluster, &policy(kinds, "720h"))?;
    let started = Instant::now();
    let running = deleters::start(
        cluster,
        Deleter::KubeRetention,
        Some(50),
        metrics_port,
        Work::Deleting,
    )?;
    let governing_after = governing(client, objects, 1, started).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (peak_rss_kib, rss_kib) = running
        .pid()
        .and_then(crate::rss_kib)
        .context("controller RSS")?;
    let offset = std::fs::metadata(cluster.layout.audit_log())?.len() as usize;
    let changed = Instant::now();
    let policies: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("retention.dev", "v1alpha1", "ClusterRetentionPolicy"),
            "clusterretentionpolicies",
        ),
    );
    let change = json!({"spec": {"ttlAfterSucceeded": "700h"}});
    policies
        .patch(POLICY, &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let change_after = governing(client, objects, 2, changed).await?;
    let change_requests = requests(cluster, offset)?;
    drop(running);
    Ok(Figures {
        objects,
        kinds,
        governing_after,
        rss_kib,
        peak_rss_kib,
        change_after,
        change_requests,
    })
}

/// The `controller-policies` section.
pub fn section(figures: &Figures) -> String {
    let requests: Vec<String> = figures
        .change_requests
        .iter()
        .map(|(request, count)| format!("{count} {request}"))
        .collect();
    format!(
        "### Policies at scale, and what changing one costs\n\n\
         Measured with `make bench-controller` (`bench/src/policies.rs`): {} custom objects, no\n\
         annotations, unfinished, spread over {} kinds defined for the run, under one\n\
         ClusterRetentionPolicy naming every kind. kube-retention's controller ({build}) starts fresh\n\
         (it watches every object of a policy's kinds); the time runs until the policy's status counts\n\
         every object (statuses are written every 5 s). RSS is read 10 s later; the peak includes the\n\
         listing. Then the policy's TTL changes: every kind is listed afresh and each object judged\n\
         again, until the status shows the new generation governing all of them. Goal: ≤ 64 MiB\n\
         including the listing peak.\n\n\
         | objects | kinds | governing all after start | RSS (MiB) | peak RSS (MiB) | change: governing all again after | change: controller requests |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n\
         | {} | {} | {:.1} s | {:.1} | {:.1} | {:.1} s | {} |\n",
        figures.objects,
        figures.kinds,
        figures.objects,
        figures.kinds,
        figures.governing_after.as_secs_f64(),
        crate::mib(figures.rss_kib),
        crate::mib(figures.peak_rss_kib),
        figures.change_after.as_secs_f64(),
        requests.join(", "),
        build = crate::measured_build(),
    )
}

/// The namespace of the one-label policy's objects.
const LABELLED_NAMESPACE: &str = "bench-policies-cel";
/// Its RetentionPolicy.
const LABEL_POLICY: &str = "one-label";

/// How long one controller took to judge every object with a one-label policy.
pub struct Judging {
    pub deleter: Deleter,
    /// From its start until the policy's status counted every object matched.
    pub governing_after: Duration,
    /// The peak resident memory of the controller and its evaluator process, added up.
    pub peak_rss_kib: u64,
}

/// Judging `objects` labelled objects with a one-label policy (a RetentionPolicy whose `match`
/// reads one label, in the objects' namespace): each of `deleters` starts fresh, `rounds`
/// times in turn, and is timed until the policy's status counts every object matched. The
/// baseline, where given ([`Deleter::KubeRetentionBaseline`]), evaluated CEL in process; this
/// controller evaluates it in its evaluator process.
pub async fn measure_one_label(
    cluster: &LocalCluster,
    client: &Client,
    objects: usize,
    kinds: usize,
    metrics_port: u16,
    deleters: &[Deleter],
    rounds: usize,
) -> Result<Vec<Judging>> {
    crate::namespace(client, LABELLED_NAMESPACE).await?;
    define(cluster, kinds)?;
    println!("creating {objects} labelled objects over {kinds} kinds");
    create_in(client, LABELLED_NAMESPACE, objects, kinds, true).await?;
    let resources: Vec<Value> = (0..kinds)
        .map(|index| json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind(index).kind}))
        .collect();
    apply(
        cluster,
        &json!({"apiVersion": "retention.dev/v1alpha1", "kind": "RetentionPolicy",
               "metadata": {"name": LABEL_POLICY, "namespace": LABELLED_NAMESPACE},
               "spec": {"resources": resources, "ttlAfterSucceeded": "720h",
                        "match": "object.metadata.labels[\"tier\"] == \"batch\""}}),
    )?;
    let policies: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        LABELLED_NAMESPACE,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("retention.dev", "v1alpha1", "RetentionPolicy"),
            "retentionpolicies",
        ),
    );
    let mut judged = Vec::new();
    for _ in 0..rounds {
        for &deleter in deleters {
            // The last contender's count stays in the status: each starts from none, so that
            // what it is timed to is a count it wrote.
            policies
                .patch_status(
                    LABEL_POLICY,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"matched": 0}})),
                )
                .await
                .context("clearing the one-label policy's count")?;
            let started = Instant::now();
            let running =
                deleters::start(cluster, deleter, Some(50), metrics_port, Work::Deleting)?;
            let pid = running.pid().context("the controller's pid")?;
            let mut peak = 0;
            let governing_after = loop {
                let status = policies.get(LABEL_POLICY).await?.data["status"].clone();
                peak = peak.max(crate::peak_rss_with_children_kib(pid).unwrap_or(0));
                if status["matched"] == objects {
                    break started.elapsed();
                }
                ensure!(
                    started.elapsed() < Duration::from_secs(3600),
                    "{}: not every object matched: {status}",
                    deleter.label()
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            };
            println!("{}: {governing_after:?}", deleter.label());
            judged.push(Judging {
                deleter,
                governing_after,
                peak_rss_kib: peak,
            });
            drop(running);
        }
    }
    Ok(judged)
}

/// The `controller-policies-cel` section.
pub fn one_label_section(objects: usize, kinds: usize, judged: &[Judging]) -> String {
    let mut rows = String::new();
    for judging in judged {
        rows.push_str(&format!(
            "| {} | {:.1} s | {:.1} |\n",
            judging.deleter.label(),
            judging.governing_after.as_secs_f64(),
            crate::mib(judging.peak_rss_kib)
        ));
    }
    let mean = |deleter: Deleter| {
        let times: Vec<f64> = judged
            .iter()
            .filter(|judging| judging.deleter == deleter)
            .map(|judging| judging.governing_after.as_secs_f64())
            .collect();
        (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64)
    };
    let ratio = match (
        mean(Deleter::KubeRetention),
        mean(Deleter::KubeRetentionBaseline),
    ) {
        (Some(now), Some(before)) => format!(
            "\nThis controller took {:.2}× the baseline's time on average (the goal: at most \
             1.25×).\n",
            now / before
        ),
        _ => "\nNo baseline was given (`make bench-controller BASELINE=<commit>`).\n".to_owned(),
    };
    format!(
        "### Judging objects with a one-label policy\n\n\
         Measured with `make bench-controller` (`bench/src/policies.rs`): {objects} labelled \
         custom objects over {kinds} kinds in one namespace, under a RetentionPolicy whose `match` \
         reads one label; each controller starts fresh, the contenders in turn, and is timed \
         until the policy's status counts every object matched (statuses are written every \
         5 s). The baseline is kube-retention's controller built at an earlier commit, which \
         evaluated CEL in process; this one evaluates it in its evaluator process, bounded by \
         the operating system. Both are the image's static build; the peak is the controller's \
         and its evaluator process's, added up. One namespace's objects are judged within its \
         share of the evaluator (a twentieth of a core), so the time is mostly that share's.\n\n\
         | controller | matching all after start | peak RSS (MiB) |\n\
         | --- | --- | --- |\n\
         {rows}{ratio}"
    )
}
