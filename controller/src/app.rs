//! The controller put together: flags to kinds, start-up checks, metrics endpoint, leader
//! election, executor and loop. `main` only parses the flags and calls [`Args::run`].

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::{mpsc, watch};

use crate::args::{Args, Propagation};
use crate::cleaners::Cleaners;
use crate::cleaners::act::Cleaning;
use crate::cleaners::sink::Sender;
use crate::cleaners::sink_policy::sink_policy;
use crate::executor::{Budget, Executor, Parts, Settings};
use crate::leader::Elector;
use crate::metrics::Metrics;
use crate::run::{Extra, Loop};
use crate::state::State;
use crate::watches::Watches;
use crate::{Result, discovery, kinds, startup};

impl Args {
    /// Runs the controller until SIGTERM.
    pub async fn run(self) -> Result<()> {
        let args = self;
        let config = kube_retention_cli::config(args.kubeconfig.as_deref()).await?;
        let sink_policy = Arc::new(sink_policy(&args, &config.cluster_url).await?);
        let client = kube::Client::try_from(config)?;
        let watched = kinds::registry(&args.kinds, &args.disabled_kinds)?;
        let scans = discovery::spawn_scans(
            client.clone(),
            watched.clone(),
            args.lease_namespace.clone(),
            args.discovery_interval,
        );
        let served = startup::served_kinds(&client, &watched).await?;
        let lease_namespace = args
            .leader_election
            .then_some(args.lease_namespace.as_str());
        let grace = args.permissions_timeout;
        startup::await_permissions(&client, &watched, &served, lease_namespace, grace).await?;

        let metrics = Metrics::default();
        let listener = tokio::net::TcpListener::bind(args.metrics_address).await?;
        tracing::info!(address = %listener.local_addr()?, "serving metrics");
        let ready = Arc::new(AtomicBool::new(false));
        let routes = http_routes(metrics.clone(), ready.clone());
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
        let propagation = match args.propagation_policy {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        };
        // One request budget for the executor and the Cleaners alike.
        let budget = Budget::per_second(NonZeroU32::new(args.qps));
        let cleaners = args.cleaners.then(|| {
            let cleaning = Cleaning {
                budget: budget.clone(),
                client: client.clone(),
                recorder: recorder.clone(),
                metrics: metrics.cleaners.clone(),
                propagation: propagation.clone(),
                sender: Arc::new(Sender::new(sink_policy)),
            };
            let cleaners = Cleaners::new(cleaning, args.page_size);
            tokio::spawn(cleaners.run(leadership.clone(), std::future::pending()))
        });
        let executor = Executor::spawn(Parts {
            client: client.clone(),
            kinds: Arc::new(RwLock::new(watched.clone())),
            settings: Settings {
                budget,
                propagation,
                concurrency: args.concurrency,
                events: args.events,
                event_window: args.event_window,
            },
            metrics: metrics.clone(),
            recorder,
            feedback: feedback_tx,
        });
        tracing::info!(%identity, qps = args.qps, leader_election = args.leader_election, "starting");
        let mut watches = Watches::new(client.clone(), args.page_size, args.list_concurrency);
        watches.start_policies();
        let evaluations = crate::run::Evaluations::start()?;
        let control = Loop {
            evaluations,
            state: State::new(watched),
            served,
            watches,
            extra: Extra::new(client),
            scans,
            executor,
            feedback,
            leadership,
            metrics,
            ready,
        };
        control.run(kube_retention_cli::shutdown_signal()).await;
        if let Some(cleaners) = cleaners {
            cleaners.abort();
        }
        if let Some(task) = lease_task {
            // The loop owned the leadership receiver; with it dropped the elector releases the
            // Lease, so a successor takes over within a retry period instead of after it expires.
            task.await.ok();
        }
        Ok(())
    }
}

/// `/healthz`, `/readyz` (200 once every kind is listed) and `/metrics`.
fn http_routes(metrics: Metrics, ready: Arc<AtomicBool>) -> Router {
    let served_metrics = metrics;
    let listed = ready;
    Router::new()
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
        )
}
