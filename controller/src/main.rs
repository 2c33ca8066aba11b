//! `kube-retention-controller`: deletes finished objects on time and enforces count limits.

use std::num::NonZeroU32;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use clap::Parser;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_controller::args::{Args, Propagation};
use kube_retention_controller::executor::{Executor, Parts, Settings};
use kube_retention_controller::leader::Elector;
use kube_retention_controller::metrics::Metrics;
use kube_retention_controller::run::Loop;
use kube_retention_controller::state::State;
use kube_retention_controller::{Error, Result, kinds, startup};
use tokio::sync::{mpsc, watch};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    kube_retention_cli::init_logging(args.log_format);
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "kube-retention-controller failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let client = kube_retention_cli::client(args.kubeconfig.as_deref()).await?;
    let mut watched = kinds::defaults();
    for spec in &args.kinds {
        watched.push(kinds::parse_extra(spec).map_err(Error::Config)?);
    }
    let served = startup::served_kinds(&client, &watched).await?;
    let lease_namespace = args
        .leader_election
        .then_some(args.lease_namespace.as_str());
    startup::check_permissions(&client, &watched, &served, lease_namespace).await?;

    let metrics = Metrics::default();
    let listener = tokio::net::TcpListener::bind(args.metrics_address).await?;
    tracing::info!(address = %listener.local_addr()?, "serving metrics");
    let served_metrics = metrics.clone();
    let ready = Arc::new(AtomicBool::new(false));
    let listed = ready.clone();
    let routes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = listed.load(Ordering::Relaxed);
                async move {
                    if ready {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "listing")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let metrics = served_metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.encode(),
                    )
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, routes).await });

    let identity = args
        .identity
        .clone()
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|name| name.trim().to_owned())
        })
        .unwrap_or_else(|| "kube-retention-controller".to_owned());
    let (leadership, lease_task) = if args.leader_election {
        let elector = Elector::new(
            client.clone(),
            &args.lease_namespace,
            &args.lease_name,
            &identity,
            Duration::from_secs(args.lease_duration),
        );
        let (leadership, task) = elector.spawn();
        (leadership, Some(task))
    } else {
        let (sender, leadership) = watch::channel(true);
        std::mem::forget(sender);
        (leadership, None)
    };

    let (feedback_tx, feedback) = mpsc::unbounded_channel();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kube-retention-controller".into(),
            instance: Some(identity.clone()),
        },
    );
    let executor = Executor::spawn(Parts {
        client: client.clone(),
        kinds: watched.clone(),
        settings: Settings {
            budget: NonZeroU32::new(args.qps),
            propagation: match args.propagation_policy {
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
                Propagation::Orphan => PropagationPolicy::Orphan,
            },
            concurrency: args.concurrency,
            events: args.events,
        },
        metrics: metrics.clone(),
        recorder,
        feedback: feedback_tx,
    });
    tracing::info!(%identity, qps = args.qps, leader_election = args.leader_election, "starting");
    let control = Loop {
        client,
        state: State::new(watched),
        served,
        executor,
        feedback,
        leadership,
        metrics,
        page_size: args.page_size,
        ready,
    };
    control.run(kube_retention_cli::shutdown_signal()).await;
    if let Some(task) = lease_task {
        // The loop owned the leadership receiver; with it dropped the elector releases the
        // Lease, so a successor takes over within a retry period instead of after it expires.
        task.await.ok();
    }
    Ok(())
}
