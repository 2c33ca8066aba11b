//! The controller put together: flags to kinds, start-up checks, metrics endpoint, leader
//! election, executor and loop. `main` only parses the flags and calls [`Args::run`].
//!
//! Every background task is supervised ([`kube_retention_runtime::supervise`]): when one ends or
//! panics, [`Args::run`] names it and fails, the process exits non-zero and the kubelet restarts
//! the container; SIGTERM still ends the loop, and the run, cleanly. The tasks, by the names the
//! log and `KUBE_RETENTION_FAULT` (builds with the `fault-injection` feature) use:
//!
//! - `metrics-server`: `/healthz`, `/readyz`, `/metrics`.
//! - `leader-election` (with `--leader-election`): the Lease.
//! - `discovery` (unless `--discovery-interval` is 0): periodic scans for annotated kinds.
//! - `executor-dispatch` and `event-digest`: the [`Executor`]'s requests and deletion Events.
//! - `cleaner-loop` (with `--cleaners`): the Cleaners.
//! - `cel-evaluator`: the thread evaluating policies' CEL.
//! - `circuit-breaker` (unless `--circuit-breaker-deletions` is 0): the breaker's ConfigMap.
//! - `watches`: the group of watch tasks, one per kind and the policies' (`watches/<kind>`).
//! - `policy-status-writer`: policies' status writes and their retries.
//! - `sink-policy`: the cluster's insides learned for the sink policy (`sinks::cluster`).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::kinds::KINDS_ANNOTATION;
use kube_retention_runtime::supervise::{self, Supervisor};
use tokio::sync::{mpsc, watch};

use crate::args::{Args, Propagation, Stamp};
use crate::executor::{Budget, Executor, Parts, Settings};
use crate::leader::Elector;
use crate::metrics::Metrics;
use crate::policy_status::writes::{self, StatusWrites};
use crate::run::{Extra, Loop};
use crate::{Error, Result, discovery, startup};
use kube_retention_cleaners::Cleaners;
use kube_retention_cleaners::act::Cleaning;
use kube_retention_evaluator::Evaluator;
use kube_retention_io::breaker::{self, Breaker};
use kube_retention_io::clock::Clock;
use kube_retention_io::initial_list::Lists;
use kube_retention_io::watches::Watches;
use kube_retention_sinks::cluster::Learning;
use kube_retention_sinks::ledger::Ledger;
use kube_retention_sinks::policy::sink_policy;
use kube_retention_sinks::{Delivery, Sender};
use kube_retention_state::{Stamping, State};

mod routes;

use routes::http_routes;

/// How long a stopping controller waits for the Lease's release.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

impl Args {
    /// Runs the controller until SIGTERM, or until a background task ends ([`Error::TaskEnded`]).
    pub async fn run(self) -> Result<()> {
        let args = self;
        let clock = Clock::System;
        let mut supervisor = Supervisor::default();
        let config = kube_retention_runtime::config(args.kubeconfig.as_deref())
            .await
            .map_err(Error::ClientConfig)?;
        let sink_policy = sink_policy(&args.sink_policy, args.pod_ip, &config.cluster_url).await?;
        if let Some(sink) = &args.ledger_sink {
            sink_policy
                .check_url(sink)
                .map_err(|refusal| Error::LedgerSink {
                    sink: sink.clone(),
                    rule: refusal.what(),
                })?;
        }
        let client = kube::Client::try_from(config).map_err(Error::Client)?;
        let selection = args.kind_selection();
        let watched = selection.registry()?;
        let (scans, scanning) = discovery::spawn_scans(
            client.clone(),
            watched.clone(),
            args.lease_namespace.clone(),
            args.discovery_interval,
        );
        supervisor.extend(scanning);
        startup::say_kubernetes_version(&client).await;
        let served = startup::served_kinds(&client, &watched).await?;
        let lease_namespace = args
            .leader_election
            .then_some(args.lease_namespace.as_str());
        let grace = args.permissions_timeout;
        let breaker_name = breaker::store::name_for(&args.lease_name);
        let breaker_store = (args.circuit_breaker_deletions > 0).then_some(startup::BreakerStore {
            namespace: &args.lease_namespace,
            name: &breaker_name,
        });
        startup::await_permissions(
            &client,
            &watched,
            &served,
            lease_namespace,
            breaker_store,
            grace,
        )
        .await?;

        let metrics = Metrics::default();
        let address = args.metrics_address;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| Error::MetricsAddress { address, source })?;
        tracing::info!(%address, "serving metrics");
        let ready = Arc::new(AtomicBool::new(false));
        let routes = http_routes(metrics.clone(), ready.clone());
        let server = async move { axum::serve(listener, routes).await };
        supervisor.add(supervise::spawn("metrics-server", server));

        let identity = args
            .identity
            .clone()
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|name| name.trim().to_owned())
            })
            .unwrap_or_else(|| "kube-retention-controller".to_owned());
        let leadership = if args.leader_election {
            let elector = Elector::new(
                client.clone(),
                &args.lease_namespace,
                &args.lease_name,
                &identity,
                Duration::from_secs(args.lease_duration),
                clock,
            )
            .publishing(KINDS_ANNOTATION, selection.to_annotation());
            let (leadership, task) = elector.spawn();
            supervisor.add(task);
            leadership
        } else {
            let (sender, leadership) = watch::channel(true);
            std::mem::forget(sender);
            leadership
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
        // One way of listing, one request budget and one circuit breaker for the executor and the
        // Cleaners alike.
        let lists = Lists::new(args.initial_list, args.page_size)
            .counting_fallbacks(metrics.list_fallbacks.clone());
        let budget = Budget::per_second(NonZeroU32::new(args.qps));
        let breaker = Breaker::new(
            args.circuit_breaker_deletions,
            args.circuit_breaker_window,
            clock,
        );
        if args.circuit_breaker_deletions > 0 {
            let store = breaker::store::Store {
                client: client.clone(),
                namespace: args.lease_namespace.clone(),
                name: breaker_name.clone(),
                breaker: breaker.clone(),
                leadership: leadership.clone(),
                recorder: recorder.clone(),
                metrics: metrics.breaker.clone(),
            };
            let storing = store.run(args.circuit_breaker_deletions, args.circuit_breaker_window);
            supervisor.add(supervise::spawn("circuit-breaker", storing));
        }
        // Every CloudEvent is judged by the admin's policy with the cluster's insides denied too,
        // as the API says them now.
        let learning = Learning {
            client: client.clone(),
            lists: lists.clone(),
            base: sink_policy,
            metrics: metrics.sink_policy.clone(),
        };
        let (sink_policy, learning) = learning.spawn();
        supervisor.add(learning);
        let sender = Arc::new(Sender::new(sink_policy));
        let (ledger, delivering) = Ledger::spawn(
            sender.clone(),
            args.ledger_sink.as_deref().map(Arc::from),
            args.ledger_queue,
            Delivery::default(),
            metrics.ledger.clone(),
        );
        supervisor.add(delivering);
        // One evaluator for every tenant's CEL: policies' and Cleaners' share its time.
        let (evaluator, evaluating) =
            Evaluator::spawn(metrics.evaluator.clone()).map_err(Error::Evaluator)?;
        supervisor.add(evaluating);
        if args.cleaners {
            let cleaning = Cleaning {
                budget: budget.clone(),
                breaker: breaker.clone(),
                client: client.clone(),
                recorder: recorder.clone(),
                metrics: metrics.cleaners.clone(),
                propagation: propagation.clone(),
                sender,
                ledger: Some(ledger.clone()),
                clock,
            };
            let cleaners = Cleaners::new(cleaning, lists.clone(), evaluator.clone());
            let run = cleaners.run(leadership.clone(), std::future::pending());
            supervisor.add(supervise::spawn("cleaner-loop", run));
        }
        let (executor, executing) = Executor::spawn(Parts {
            client: client.clone(),
            settings: Settings {
                budget,
                breaker,
                propagation,
                concurrency: args.concurrency,
                events: args.events,
                event_window: args.event_window,
            },
            metrics: metrics.clone(),
            recorder,
            feedback: feedback_tx,
            ledger: Some(ledger),
            clock,
        });
        supervisor.extend(executing);
        tracing::info!(%identity, qps = args.qps, leader_election = args.leader_election, "starting");
        let (watch_tasks, watching) = supervise::group("watches");
        supervisor.add(watching);
        let mut watches = Watches::new(client.clone(), lists, args.list_concurrency, watch_tasks);
        watches.start_policies();
        let evaluations = crate::run::Evaluations::new(evaluator, client.clone());
        let (statuses, writing) = StatusWrites::spawn(client, writes::RETRY);
        supervisor.add(writing);
        let control = Loop {
            evaluations,
            state: State::new(watched)
                .with_max_immediate_deletions(args.max_immediate_deletions)
                .with_ledger(args.ledger_sink.is_some())
                .with_stamping(match args.stamp {
                    Stamp::Finished => Stamping::Finished,
                    Stamp::Never => Stamping::Never,
                }),
            served,
            watches,
            extra: Extra::new(statuses),
            scans,
            executor,
            feedback,
            leadership,
            metrics,
            ready,
            clock,
        };
        let stopped = supervisor
            .watch(control.run(kube_retention_runtime::shutdown_signal()))
            .await;
        // Stopping either way: the Lease is released so that a successor takes over within a
        // retry period instead of after it expires. The elector releases it once every
        // leadership receiver is gone: the loop's went with it, the Cleaners' and the circuit
        // breaker's go with them.
        for holding_leadership in ["cleaner-loop", "circuit-breaker"] {
            if let Some(task) = supervisor.remove(holding_leadership) {
                task.abort();
            }
        }
        if let Some(lease) = supervisor.remove("leader-election")
            && tokio::time::timeout(RELEASE_TIMEOUT, lease).await.is_err()
        {
            tracing::warn!("the leader lease was not released in time");
        }
        stopped.map_err(Error::TaskEnded)
    }
}
