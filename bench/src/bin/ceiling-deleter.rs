//! The ceiling of `make bench-controller`: a deleter with no logic, for what the API server itself
//! accepts on the same machine. Before `--at` it lists the namespace's Jobs (metadata only); at
//! `--at` it sends each one DELETE with uid and resourceVersion preconditions, `--concurrency` in
//! flight, and reads no answer beyond its status. It judges nothing, keeps no queue, budgets
//! nothing and records no Event: what kube-retention's controller does beside the DELETE is what
//! its deletions per second lose against this one's.
//!
//! Once done it prints what it sent and waits to be stopped, so the benchmark reads its memory
//! the way it reads a controller's.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use futures::{StreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, Preconditions, PropagationPolicy};
use kube::core::Request;
use kube::{Api, Client, Resource};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: std::path::PathBuf,
    #[arg(long)]
    namespace: String,
    /// When to start deleting (RFC 3339).
    #[arg(long)]
    at: Timestamp,
    /// DELETEs in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

/// Every Job of `namespace`, a page of 500 at a time.
async fn list(client: &Client, namespace: &str) -> Result<Vec<PartialObjectMeta<Job>>> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let mut params = ListParams::default().limit(500);
    let mut listed = Vec::new();
    loop {
        let page = jobs.list_metadata(&params).await.context("listing Jobs")?;
        listed.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(listed),
        }
    }
}

/// One DELETE with preconditions; the answer's body is read and dropped.
async fn delete(client: &Client, namespace: &str, job: &PartialObjectMeta<Job>) -> Result<()> {
    let name = job
        .metadata
        .name
        .as_deref()
        .context("a Job without a name")?;
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: job.metadata.uid.clone(),
            resource_version: job.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let request = Request::new(Job::url_path(&(), Some(namespace)))
        .delete(name, &params)
        .context("building a DELETE")?;
    client
        .request_text(request.map(Into::into))
        .await
        .with_context(|| format!("deleting {namespace}/{name}"))?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let jobs = list(&client, &args.namespace).await?;
    println!("listed {} Jobs; deleting at {}", jobs.len(), args.at);
    if let Ok(wait) = Duration::try_from(args.at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    let failed = stream::iter(&jobs)
        .map(|job| delete(&client, &args.namespace, job))
        .buffer_unordered(args.concurrency)
        .filter_map(|outcome| async move { outcome.err() })
        .inspect(|error| eprintln!("{error:#}"))
        .count()
        .await;
    println!(
        "sent {} DELETEs, {failed} failed, in {:.3} s from --at",
        jobs.len(),
        Timestamp::now().duration_since(args.at).as_secs_f64()
    );
    std::future::pending::<()>().await;
    Ok(())
}
