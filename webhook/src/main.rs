//! `kube-retention-webhook`: validating and mutating admission for retention settings.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use kube_retention_webhook::args::{Args, LogFormat};
use kube_retention_webhook::parents::ApiParents;
use kube_retention_webhook::tls::{CertificateFiles, server_config};
use kube_retention_webhook::{Context, metrics::Metrics, router, server};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match args.log_format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
        LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter).init(),
    }
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
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(kube::Error::InferKubeconfig)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(kube::Error::InferKubeconfig)?
        }
        None => kube::Config::infer()
            .await
            .map_err(kube::Error::InferConfig)?,
    };
    let client = kube::Client::try_from(config)?;
    let context = Arc::new(Context {
        parents: Arc::new(ApiParents(client)),
        metrics: Metrics::default(),
    });
    let tls = server_config(
        CertificateFiles {
            cert: args.tls_cert,
            key: args.tls_key,
        },
        args.cert_reload_interval,
    )?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(address = %listener.local_addr()?, "serving admission webhook");
    server::serve(
        listener,
        tls,
        router::router(context, args.max_body_bytes),
        shutdown_signal(),
    )
    .await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                return std::future::pending().await;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
