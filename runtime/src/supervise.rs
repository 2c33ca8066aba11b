//! Supervision of a binary's background tasks, as linkerd2's proxy does it: every task a binary
//! starts beside its main work (a metrics server, a dispatcher, a reload loop, a thread) is
//! meant to run until the process stops, so its end — returned, failed or panicked — is a fault.
//! A detached task that dies leaves a process that still answers `/healthz` but no longer does
//! part of its job; a supervised one stops the process, which the kubelet then restarts.
//!
//! [`spawn`] and [`thread`] start a task and answer its [`Supervised`] handle; [`group`] does the
//! same for tasks started and stopped at run time (watches), whose deliberate stops are not
//! faults. A [`Supervisor`] holds the handles, and [`Supervisor::watch`] runs the binary's main
//! future beside them: the main future's end (a clean shutdown on SIGTERM) is answered as it is
//! and never reported; a task that ends first is logged by name and answered as [`Ended`], for
//! the binary to exit non-zero. Tasks that end after the main future (because shutdown closed
//! their channels) are no longer watched.
//!
//! Faults can be injected into named tasks in test builds only ([`fault`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio::task::{AbortHandle, JoinError};

pub mod fault;
mod group;

pub use group::{Group, group};

/// How a supervised task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEnd {
    /// It returned, although it was meant to run until the process stops.
    Returned,
    /// It returned this error.
    Failed(String),
    /// It panicked with this message.
    Panicked(String),
    /// It was aborted from elsewhere.
    Cancelled,
}

impl fmt::Display for TaskEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Returned => f.write_str("returned"),
            Self::Failed(error) => write!(f, "failed: {error}"),
            Self::Panicked(message) => write!(f, "panicked: {message}"),
            Self::Cancelled => f.write_str("was cancelled"),
        }
    }
}

/// The supervised task that ended, by name, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub task: String,
    pub outcome: TaskEnd,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "background task {} {}", self.task, self.outcome)
    }
}

impl std::error::Error for Ended {}

/// What a task's output says about how it ended.
pub trait TaskOutput: Send + 'static {
    fn outcome(self) -> TaskEnd;
}

impl TaskOutput for () {
    fn outcome(self) -> TaskEnd {
        TaskEnd::Returned
    }
}

impl<E: fmt::Display + Send + 'static> TaskOutput for Result<(), E> {
    fn outcome(self) -> TaskEnd {
        match self {
            Ok(()) => TaskEnd::Returned,
            Err(error) => TaskEnd::Failed(error.to_string()),
        }
    }
}

/// A supervised task: a future that completes when the task ends, saying how.
pub struct Supervised {
    name: String,
    ended: Pin<Box<dyn Future<Output = Ended> + Send>>,
    abort: Option<AbortHandle>,
}

impl Supervised {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Aborts the task (a thread cannot be aborted; it carries on).
    pub fn abort(&self) {
        if let Some(abort) = &self.abort {
            abort.abort();
        }
    }
}

impl Future for Supervised {
    type Output = Ended;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        self.ended.as_mut().poll(cx)
    }
}

/// Spawns `task` on tokio as the supervised task `name`.
pub fn spawn<T: TaskOutput>(
    name: &'static str,
    task: impl Future<Output = T> + Send + 'static,
) -> Supervised {
    let handle = tokio::spawn(fault::inject(name, task));
    let abort = Some(handle.abort_handle());
    let ended = async move {
        let outcome = match handle.await {
            Ok(Ok(output)) => output.outcome(),
            Ok(Err(injected)) => TaskEnd::Failed(injected.to_string()),
            Err(error) => joined(error),
        };
        Ended {
            task: name.to_owned(),
            outcome,
        }
    };
    Supervised {
        name: name.to_owned(),
        ended: Box::pin(ended),
        abort,
    }
}

/// Runs `body` on a thread of its own named `name`, supervised: its end (a panic included) is
/// signalled through a channel, since a thread's join blocks.
pub fn thread(
    name: &'static str,
    body: impl FnOnce() + Send + 'static,
) -> std::io::Result<Supervised> {
    let (done, finished) = oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let run = AssertUnwindSafe(|| fault::inject_blocking(name, body));
            let outcome = match std::panic::catch_unwind(run) {
                Ok(Ok(())) => TaskEnd::Returned,
                Ok(Err(injected)) => TaskEnd::Failed(injected.to_string()),
                Err(payload) => TaskEnd::Panicked(panic_message(payload.as_ref())),
            };
            done.send(outcome).ok();
        })?;
    let ended = async move {
        let outcome = finished
            .await
            .unwrap_or_else(|_| TaskEnd::Failed("the thread ended without reporting".into()));
        Ended {
            task: name.to_owned(),
            outcome,
        }
    };
    Ok(Supervised {
        name: name.to_owned(),
        ended: Box::pin(ended),
        abort: None,
    })
}

fn joined(error: JoinError) -> TaskEnd {
    match error.try_into_panic() {
        Ok(payload) => TaskEnd::Panicked(panic_message(payload.as_ref())),
        Err(_) => TaskEnd::Cancelled,
    }
}

/// A panic's message, where it has one (`panic!` with a literal or a format string).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// The supervised tasks of a binary.
#[derive(Default)]
pub struct Supervisor {
    tasks: Vec<Supervised>,
}

impl Supervisor {
    pub fn add(&mut self, task: Supervised) {
        self.tasks.push(task);
    }

    /// The names of the tasks still supervised.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tasks.iter().map(Supervised::name)
    }

    /// Stops supervising the task `name` and answers it, for instance to await its end on a
    /// shutdown.
    pub fn remove(&mut self, name: &str) -> Option<Supervised> {
        let index = self.tasks.iter().position(|task| task.name == name)?;
        Some(self.tasks.swap_remove(index))
    }

    /// The first task to end, no longer supervised; pending while none does (forever if there
    /// are none). Cancel-safe: dropping it loses nothing.
    pub async fn ended(&mut self) -> Ended {
        std::future::poll_fn(|cx| {
            for index in 0..self.tasks.len() {
                if let Poll::Ready(ended) = Pin::new(&mut self.tasks[index]).poll(cx) {
                    self.tasks.swap_remove(index);
                    return Poll::Ready(ended);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Runs `main` while supervising: `main`'s output if it ends first (or at the same time as
    /// a task), else the task that ended, logged by name.
    pub async fn watch<T>(&mut self, main: impl Future<Output = T>) -> Result<T, Ended> {
        tokio::select! {
            biased;
            output = main => Ok(output),
            ended = self.ended() => {
                tracing::error!(
                    task = %ended.task,
                    outcome = %ended.outcome,
                    "a background task ended; stopping so that the process is restarted"
                );
                Err(ended)
            }
        }
    }
}

impl Extend<Supervised> for Supervisor {
    fn extend<I: IntoIterator<Item = Supervised>>(&mut self, tasks: I) {
        self.tasks.extend(tasks);
    }
}

/// Polls `future`, catching a panic in it as `Err` with the panic's payload.
async fn catch_unwind<F: Future>(future: F) -> std::thread::Result<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload)),
        }
    })
    .await
}
