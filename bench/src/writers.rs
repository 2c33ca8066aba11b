//! What the writer check costs (`make bench-webhook`): the same validating request — a ConfigMap
//! given a TTL — against the release webhook with the check off, on with one writer (answers
//! cached 5 s), and on with a new writer for every request (a SubjectAccessReview each), one
//! after the other in the same run. The reviews the API server answered are counted from its
//! own metrics.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use kube_retention_certs::CertificateAuthority;
use kube_retention_e2e::LocalCluster;

use crate::load;
use crate::webhook::{NAMESPACE, Webhook, annotated_config_map, target, wait_until_serving};

/// The writer of the benchmark's requests, allowed to delete ConfigMaps and Jobs in its
/// namespace: the writer check admits them (from its cache but every 5 s).
pub const WRITER: &str = "bench-writer";

/// What the comparison needs: the cluster, the webhook binary and its files, and the load.
pub struct Setup<'a> {
    pub cluster: &'a LocalCluster,
    pub binary: &'a Path,
    pub tls: &'a Path,
    pub ca: &'a CertificateAuthority,
    pub kubeconfig: &'a Path,
    pub seconds: u64,
    pub connections: usize,
}

/// One configuration measured at some rates.
struct Variant {
    check: &'static str,
    writers: &'static str,
    flags: &'static [&'static str],
    distinct_writers: bool,
    rates: Vec<u64>,
}

/// Grants [`WRITER`] delete on ConfigMaps and Jobs in the benchmark's namespace.
pub fn grant_writer(cluster: &LocalCluster) -> Result<()> {
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: bench-writer, namespace: {NAMESPACE}}}\n\
         rules: [{{apiGroups: [\"\", batch], resources: [configmaps, jobs], verbs: [delete]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: bench-writer, namespace: {NAMESPACE}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: bench-writer}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {WRITER}}}]\n"
    );
    kube_retention_e2e::run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), &yaml)?;
    Ok(())
}

/// The markdown table body, one row per configuration and rate.
pub async fn measure(setup: &Setup<'_>, rates: &[u64], uncached_rates: &[u64]) -> Result<String> {
    let variants = [
        Variant {
            check: "off",
            writers: "one",
            flags: &["--check-writers=false"],
            distinct_writers: false,
            rates: rates.to_vec(),
        },
        Variant {
            check: "on",
            writers: "one (cached)",
            flags: &[],
            distinct_writers: false,
            rates: rates.to_vec(),
        },
        Variant {
            check: "on",
            writers: "a new one per request",
            flags: &[],
            distinct_writers: true,
            rates: uncached_rates.to_vec(),
        },
    ];
    let mut rows = Vec::new();
    for variant in &variants {
        rows.extend(measure_variant(setup, variant).await?);
    }
    Ok(rows.join("\n"))
}

async fn measure_variant(setup: &Setup<'_>, variant: &Variant) -> Result<Vec<String>> {
    let webhook = Webhook::start(setup.binary, setup.tls, setup.kubeconfig, variant.flags)?;
    let most = variant.rates.iter().max().copied().unwrap_or(1) * setup.seconds;
    let requests = if variant.distinct_writers {
        (0..most.max(1))
            .map(|index| {
                (
                    "/validate",
                    annotated_config_map(&format!("{WRITER}-{index}")),
                )
            })
            .collect()
    } else {
        vec![("/validate", annotated_config_map(WRITER))]
    };
    let target = target(setup.ca, webhook.port, requests)?;
    wait_until_serving(&target).await?;
    let mut rows = Vec::new();
    for &rate in &variant.rates {
        let before = reviews_answered(setup.cluster)?;
        let outcome = load::fixed_rate(
            target.clone(),
            rate,
            Duration::from_secs(setup.seconds),
            setup.connections,
        )
        .await;
        let reviews = reviews_answered(setup.cluster)?.saturating_sub(before);
        let row = format!(
            "| {} | {} | {rate} req/s | {} | {} | {:.3} | {:.3} | {:.3} | {reviews} |",
            variant.check,
            variant.writers,
            outcome.completed,
            outcome.errors,
            outcome.millis(50.0),
            outcome.millis(99.0),
            outcome.millis(99.9),
        );
        println!("{row}");
        rows.push(row);
    }
    Ok(rows)
}

/// SubjectAccessReviews the API server has answered so far, from its metrics.
fn reviews_answered(cluster: &LocalCluster) -> Result<u64> {
    let metrics = kube_retention_e2e::run(cluster.kubectl().args(["get", "--raw", "/metrics"]))?;
    let mut total = 0.0;
    for line in metrics.lines().filter(|line| {
        line.starts_with("apiserver_request_total{")
            && line.contains("resource=\"subjectaccessreviews\"")
            && line.contains("verb=\"POST\"")
    }) {
        let value = line
            .rsplit(' ')
            .next()
            .and_then(|value| value.parse::<f64>().ok())
            .context("an apiserver_request_total line without a value")?;
        total += value;
    }
    Ok(total as u64)
}
