//! The controller's loop, built for a test against a mocked API server: a leader, an executor
//! without a budget, one kind's watch fed by the test, and an evaluator as the test sets it up.

#![allow(clippy::unwrap_used, dead_code)] // test support; not every test uses every part

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Recorder, Reporter};
use kube_retention_common::Registry;
use kube_retention_common::kinds::KindId;
use kube_retention_controller::executor::{Budget, Executor, Parts, Settings};
use kube_retention_controller::metrics::Metrics;
use kube_retention_controller::run::{
    Clock, Core, Discovered, Evaluations, Governed, Loop, Policies,
};
use kube_retention_evaluator::Evaluator;
use kube_retention_io::initial_list::{InitialList, Lists};
use kube_retention_io::list_turns::ListTurns;
use kube_retention_io::status_writes::{self as writes, StatusWrites};
use kube_retention_io::watch_set::Watching;
use kube_retention_io::watches::{WatchEvent, Watches};
use kube_retention_runtime::object_memory::{DEFAULT_BYTES, ObjectMemory};
use kube_retention_state::State;
use tokio::sync::{mpsc, watch};

/// The loop running, and what the test holds of it: the events it feeds as `kind`'s watch, and
/// the leadership it may take away.
pub struct Running {
    pub events: mpsc::UnboundedSender<WatchEvent>,
    pub leading: watch::Sender<bool>,
    pub kind: KindId,
    pub task: tokio::task::JoinHandle<()>,
    /// The budget of decoded objects the loop's watches charge.
    pub memory: ObjectMemory,
}

/// Starts the loop on `client`, judging at `clock`, with `kind_name`'s watch fed by the test,
/// its expressions evaluated by `evaluator` (whose thread `evaluating` keeps).
pub fn start<T: Send + 'static>(
    client: Client,
    clock: Clock,
    kind_name: &str,
    evaluator: (Evaluator, T),
) -> Running {
    let state = State::new(Registry::builtin().clone());
    start_with(state, client, clock, kind_name, evaluator)
}

/// As [`start`], the loop's state made by the test (its bounds, say).
pub fn start_with<T: Send + 'static>(
    state: State,
    client: Client,
    clock: Clock,
    kind_name: &str,
    evaluator: (Evaluator, T),
) -> Running {
    let memory = ObjectMemory::new(DEFAULT_BYTES);
    start_within(memory, state, client, clock, kind_name, evaluator)
}

/// As [`start_with`], its decoded objects charged to `memory`.
pub fn start_within<T: Send + 'static>(
    memory: ObjectMemory,
    state: State,
    client: Client,
    clock: Clock,
    kind_name: &str,
    (evaluator, evaluating): (Evaluator, T),
) -> Running {
    let kinds = Registry::builtin().clone();
    let kind = kinds.named(kind_name).unwrap();
    let (feedback_tx, feedback) = mpsc::unbounded_channel();
    let reporter = Reporter {
        controller: "test".into(),
        instance: None,
    };
    let (executor, executing) = Executor::spawn(Parts {
        client: client.clone(),
        settings: Settings {
            breaker: kube_retention_io::breaker::Breaker::off(),
            budget: Budget::unlimited(),
            propagation: PropagationPolicy::Background,
            concurrency: 1,
            events: false,
            event_window: Duration::ZERO,
        },
        metrics: Metrics::default(),
        recorder: Recorder::new(client.clone(), reporter),
        feedback: feedback_tx,
        ledger: None,
        clock,
    });
    let (group, watching) = kube_retention_runtime::supervise::group("watches");
    let lists = Watching {
        lists: Lists::new(InitialList::Pages, 500),
        turns: ListTurns::new(1),
        tasks: group,
        memory: memory.clone(),
    };
    let mut watches = Watches::new(client.clone(), lists);
    let (events, replayed) = mpsc::unbounded_channel::<WatchEvent>();
    let replayed = futures::stream::unfold(replayed, |mut events| async move {
        Some((events.recv().await?, events))
    });
    watches.replay(kind, kinds[kind].watch.clone(), replayed.boxed());
    let evaluations = Evaluations::new(evaluator, client.clone(), watches.room());
    let (scans_tx, scans) = mpsc::channel(1);
    let (leading, leadership) = watch::channel(true);
    let budget = kube_retention_io::budget::Budget::unlimited();
    let (statuses, writing) =
        StatusWrites::spawn(client, writes::RETRY, budget, leadership.clone());
    let core = Core {
        state,
        served: Vec::new(),
        watches,
        metrics: Metrics::default(),
        clock,
    };
    let control = Loop {
        core,
        scans,
        executor,
        feedback,
        leadership,
        ready: Arc::new(AtomicBool::new(false)),
        policies: Policies::new(statuses),
        evaluations,
        governed: Governed::default(),
        discovered: Discovered::default(),
    };
    let background = (executing, watching, evaluating, writing, scans_tx);
    let task = tokio::spawn(async move {
        control.run(std::future::pending()).await;
        drop(background);
    });
    Running {
        events,
        leading,
        kind,
        task,
        memory,
    }
}
