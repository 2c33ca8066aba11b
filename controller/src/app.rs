//! The controller put together. `main` only parses the flags and calls [`Args::run`], which
//! makes the [`Config`], the client and the clock, builds the [`Controller`] from them
//! ([`Controller::build`]: start-up checks, metrics endpoint, leader election, executor, loop)
//! and runs it. A test builds it the same way, from a `Config`, a mocked client and its clock.
//!
//! Every background task is supervised ([`kube_retention_runtime::supervise`]): when one ends or
//! panics, [`Controller::run`] names it and fails, the process exits non-zero and the kubelet restarts
//! the container; SIGTERM still ends the loop, and the run, cleanly. The tasks, by the names the
//! log and `KUBE_RETENTION_FAULT` (builds with the `fault-injection` feature) use:
//!
//! - `metrics-server`: `/healthz`, `/readyz`, `/metrics`.
//! - `leader-election` (with `--leader-election`): the Lease.
//! - `discovery` (unless `--discovery-interval` is 0): periodic scans for annotated kinds.
//! - `executor-dispatch` and `event-digest`: the [`Executor`]'s requests and deletion Events.
//! - `cleaner-loop` (with `--cleaners`): the Cleaners.
//! - `cel-evaluator`: the thread evaluating policies' CEL.
//! - `circuit-breaker` (unless `--circuit-breaker` and `--cluster-circuit-breaker` are both off):
//!   the breakers' ConfigMaps.
//! - `watches`: the group of watch tasks, one per kind and the policies' (`watches/<kind>`).
//! - `status-writer`: policies' and Cleaners' status writes, and their retries.
//! - `sink-policy`: the cluster's insides learned for the sink policy (`sinks::cluster`).
//! - `ledger-delivery`: tenants' CloudEvents (policies' sinks, Cleaners'), and
//!   `ledger-cluster-delivery` (with `--ledger-sink`): the admin's, apart.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::kinds::KINDS_ANNOTATION;
use kube_retention_runtime::object_memory::ObjectMemory;
use kube_retention_runtime::supervise::{self, Supervisor};
use tokio::sync::{mpsc, watch};

use crate::args::Args;
use crate::config::Config;
use crate::executor::{Budget, Executor, Parts, Settings};
use crate::leader::Elector;
use crate::metrics::Metrics;
use crate::run::{Core, Discovered, Governed, Loop, Policies};
use crate::{Error, Result, discovery, startup};
use kube_retention_cleaners::Cleaners;
use kube_retention_cleaners::act::Cleaning;
use kube_retention_evaluator::Evaluator;
use kube_retention_io::breaker::{self, Breaker};
use kube_retention_io::clock::Clock;
use kube_retention_io::initial_list::Lists;
use kube_retention_io::list_turns::ListTurns;
use kube_retention_io::page_bytes::PageBytes;
use kube_retention_io::status_writes::{self, StatusWrites};
use kube_retention_io::watch_set::Watching;
use kube_retention_io::watches::Watches;
use kube_retention_sinks::cluster::Learning;
use kube_retention_sinks::ledger::Ledger;
use kube_retention_sinks::policy::sink_policy;
use kube_retention_sinks::{Delivery, Sender};
use kube_retention_state::State;

mod routes;

use routes::http_routes;

/// How long a stopping controller waits for the Lease's release.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// The controller built: its loop, and the supervisor of every background task.
pub struct Controller {
    control: Loop,
    supervisor: Supervisor,
}

impl Args {
    /// Runs the controller until SIGTERM, or until a background task ends ([`Error::TaskEnded`]).
    pub async fn run(self) -> Result<()> {
        let mut config = Config::from_args(&self);
        let client_config = kube_retention_runtime::config(self.kubeconfig.as_deref())
            .await
            .map_err(Error::ClientConfig)?;
        config.api_server = Some(client_config.cluster_url.clone());
        let client = kube::Client::try_from(client_config).map_err(Error::Client)?;
        let controller = Controller::build(config, client, Clock::System).await?;
        controller
            .run(kube_retention_runtime::shutdown_signal())
            .await
    }
}

impl Controller {
    /// Checks the cluster (the kinds served, the permissions granted), then makes every part
    /// from `config` and starts it under one supervisor; nothing is deleted before [`run`].
    ///
    /// [`run`]: Controller::run
    pub async fn build(config: Config, client: kube::Client, clock: Clock) -> Result<Self> {
        let mut supervisor = Supervisor::default();
        let sink_policy = sink_policy(
            &config.sink_policy,
            config.pod_ip,
            config.api_server.as_ref(),
        )
        .await?;
        if let Some(sink) = &config.ledger.sink {
            sink_policy
                .check_url(sink)
                .map_err(|refusal| Error::LedgerSink {
                    sink: sink.clone(),
                    rule: refusal.what(),
                })?;
        }
        let selection = &config.kinds.selection;
        let watched = selection.registry()?;
        let (scans, scanning) = discovery::spawn_scans(
            client.clone(),
            watched.clone(),
            config.lease.namespace.clone(),
            config.kinds.discovery_interval,
        );
        supervisor.extend(scanning);
        startup::say_kubernetes_version(&client).await;
        let served = startup::served_kinds(&client, &watched).await?;
        let lease_namespace = config
            .lease
            .election
            .then_some(config.lease.namespace.as_str());
        let breaker_name = breaker::store::name_for(&config.lease.name);
        let namespaces_name = breaker::store::namespaces_name_for(&config.lease.name);
        let breaker_store = config.breaker.is_on().then_some(startup::BreakerStore {
            namespace: &config.lease.namespace,
            name: &breaker_name,
            namespaces_name: &namespaces_name,
        });
        startup::await_permissions(
            &client,
            &watched,
            &served,
            lease_namespace,
            breaker_store,
            config.kinds.permissions_timeout,
        )
        .await?;

        let metrics = Metrics::default();
        // Every page any part lists held to its bound (before any of them lists).
        let client = PageBytes::new(config.lists.page_bytes)
            .counting(metrics.list_pages_read_again.clone())
            .client(client);
        let address = config.metrics_address;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| Error::MetricsAddress { address, source })?;
        tracing::info!(%address, "serving metrics");
        let ready = Arc::new(AtomicBool::new(false));
        let routes = http_routes(metrics.clone(), ready.clone());
        let server = async move { axum::serve(listener, routes).await };
        supervisor.add(supervise::spawn("metrics-server", server));

        let identity = config.lease.identity.clone();
        let leadership = if config.lease.election {
            let elector = Elector::new(
                client.clone(),
                &config.lease.namespace,
                &config.lease.name,
                &identity,
                config.lease.duration,
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
                controller: crate::NAME.into(),
                instance: Some(identity.clone()),
            },
        );
        let propagation = config.deletions.propagation.clone();
        // One way of listing and its turns, one request budget (the status writer's too), one
        // status writer and one set of circuit breakers for the retention loop and the Cleaners
        // alike.
        let lists = Lists::new(config.lists.initial_list, config.lists.page_size)
            .counting_fallbacks(metrics.list_fallbacks.clone());
        let (tasks, watching) = supervise::group("watches");
        supervisor.add(watching);
        let watching = Watching {
            lists: lists.clone(),
            turns: ListTurns::new(config.lists.concurrency),
            tasks,
            memory: ObjectMemory::new(config.object_memory),
        };
        let budget = Budget::per_second(NonZeroU32::new(config.deletions.qps));
        let (statuses, writing) = StatusWrites::spawn(
            client.clone(),
            status_writes::RETRY,
            budget.clone(),
            leadership.clone(),
        );
        supervisor.add(writing);
        let limits = config.breaker;
        let breaker = Breaker::new(limits.cluster, limits.per_namespace, clock);
        if limits.is_on() {
            let store = breaker::store::Store {
                client: client.clone(),
                namespace: config.lease.namespace.clone(),
                name: breaker_name.clone(),
                namespaces_name: namespaces_name.clone(),
                breaker: breaker.clone(),
                leadership: leadership.clone(),
                recorder: recorder.clone(),
                metrics: metrics.breaker.clone(),
            };
            let storing = store.run(limits.cluster, limits.per_namespace);
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
            sender,
            config.ledger.sink.as_deref().map(Arc::from),
            config.ledger.queue,
            Delivery::default(),
            metrics.ledger.clone(),
        );
        supervisor.extend(delivering);
        // One evaluator for every tenant's CEL: policies' and Cleaners' share its time.
        let (evaluator, evaluating) = Evaluator::spawn(
            metrics.evaluator.clone(),
            config.evaluator.program.clone(),
            config.evaluator.limits,
        )
        .map_err(Error::Evaluator)?;
        supervisor.add(evaluating);
        if config.cleaners {
            let cleaning = Cleaning {
                budget: budget.clone(),
                breaker: breaker.clone(),
                client: client.clone(),
                recorder: recorder.clone(),
                metrics: metrics.cleaners.clone(),
                propagation: propagation.clone(),
                ledger: ledger.clone(),
                clock,
                max_immediate_deletions: config.max_immediate_deletions,
            };
            let cleaners = Cleaners::new(
                cleaning,
                watching.clone(),
                statuses.clone(),
                evaluator.clone(),
            );
            let run = cleaners.run(leadership.clone(), std::future::pending());
            supervisor.add(supervise::spawn("cleaner-loop", run));
        }
        let (executor, executing) = Executor::spawn(Parts {
            client: client.clone(),
            settings: Settings {
                budget,
                breaker,
                propagation,
                concurrency: config.deletions.concurrency,
                events: config.deletions.events,
                event_window: config.deletions.event_window,
            },
            metrics: metrics.clone(),
            recorder,
            feedback: feedback_tx,
            ledger: Some(ledger),
            clock,
        });
        supervisor.extend(executing);
        tracing::info!(%identity, qps = config.deletions.qps, leader_election = config.lease.election, "starting");
        let mut watches = Watches::new(client.clone(), watching);
        watches.start_policies();
        let evaluations = crate::run::Evaluations::new(evaluator, client.clone(), watches.room());
        let core = Core {
            state: State::new(watched)
                .with_max_immediate_deletions(config.max_immediate_deletions)
                .with_max_tracked(config.kinds.max_tracked)
                .with_ledger(config.ledger.sink.is_some())
                .with_stamping(config.deletions.stamping),
            served,
            watches,
            metrics,
            clock,
        };
        let control = Loop {
            core,
            scans,
            executor,
            feedback,
            leadership,
            ready,
            policies: Policies::new(statuses),
            evaluations,
            governed: Governed::default(),
            discovered: Discovered::default(),
        };
        Ok(Self {
            control,
            supervisor,
        })
    }

    /// Runs the loop until `shutdown`, or until a background task ends ([`Error::TaskEnded`]);
    /// either way the Lease is released on the way out.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let Self {
            control,
            mut supervisor,
        } = self;
        let stopped = supervisor.watch(control.run(shutdown)).await;
        // Stopping either way: the Lease is released so that a successor takes over within a
        // retry period instead of after it expires. The elector releases it once every
        // leadership receiver is gone: the loop's went with it, the Cleaners', the circuit
        // breaker's and the status writer's go with them.
        for holding_leadership in ["cleaner-loop", "circuit-breaker", "status-writer"] {
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
