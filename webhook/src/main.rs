//! `kube-retention-webhook`: validating and mutating admission for retention settings.
//!
//! Its one background task beside the server, `tls-reload` (the certificate's reload), is
//! supervised ([`kube_retention_runtime::supervise`]): if it ends or panics the webhook names it and
//! exits non-zero, for the kubelet to restart it; SIGTERM still drains and exits 0. Builds with
//! the `fault-injection` feature end it on `KUBE_RETENTION_FAULT=tls-reload` (`:panic` to panic)
//! after `KUBE_RETENTION_FAULT_AFTER_SECONDS`.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use clap::Parser;
use kube_retention_common::kinds::KindSelection;
use kube_retention_runtime::supervise::Supervisor;
use kube_retention_webhook::access::Reviews;
use kube_retention_webhook::args::Args;
use kube_retention_webhook::parents::ApiParents;
use kube_retention_webhook::tls::{CertificateFiles, server_config};
use kube_retention_webhook::{Context, Error, router, server};

/// The image's static musl binaries would otherwise allocate through musl's own allocator: one
/// lock for every allocation, a third of mimalloc's admission throughput (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The static build's memcpy in place of musl's (see the crate).
use kube_retention_memcpy as _;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    kube_retention_runtime::init_logging(args.log_format);
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "kube-retention-webhook failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> kube_retention_webhook::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube_retention_runtime::client(args.kubeconfig.as_deref()).await?;
    let kinds = KindSelection {
        disabled_kinds: args.disabled_kinds.clone(),
        ..KindSelection::default()
    }
    .registry()?;
    let sink_policy = args.sink_policy.policy()?;
    let mut context = Context::new(Arc::new(ApiParents(client.clone())))
        .with_kinds(kinds)
        .with_sink_policy(sink_policy);
    let reviews = Arc::new(Reviews::new(client, &args.controller_user));
    if !args.controller_user.is_empty() {
        context = context.with_access(reviews.clone());
    }
    if args.check_writers {
        context = context.with_writers(reviews, &args.controller_user);
    }
    let context = Arc::new(context);
    let mut supervisor = Supervisor::default();
    let (tls, reloading) = server_config(
        CertificateFiles {
            cert: args.tls_cert,
            key: args.tls_key,
        },
        args.cert_reload_interval,
    )?;
    supervisor.add(reloading);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| Error::Bind {
            address: args.listen,
            source,
        })?;
    let address = listener.local_addr().map_err(|source| Error::Bind {
        address: args.listen,
        source,
    })?;
    tracing::info!(%address, "serving admission webhook");
    let router = router::router(context.clone(), args.max_body_bytes);
    let shutdown = async move {
        kube_retention_runtime::shutdown_signal().await;
        context.draining.store(true, Ordering::Relaxed);
        tracing::info!(delay = ?args.shutdown_delay, "not ready; serving until the endpoints catch up");
        tokio::time::sleep(args.shutdown_delay).await;
        tracing::info!("draining in-flight requests");
    };
    supervisor
        .watch(server::serve(listener, tls, router, shutdown))
        .await?
        .map_err(Error::Serve)?;
    tracing::info!("stopped");
    Ok(())
}
