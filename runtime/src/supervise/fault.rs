//! Faults injected into supervised tasks, so that end-to-end tests can prove that a task's end
//! restarts the process. Only builds with the `fault-injection` feature read the environment
//! (this crate's feature, turned on by the controller's and the webhook's features of the same
//! name); the default build injects nothing and reads no variable.
//!
//! - `KUBE_RETENTION_FAULT=<task>` makes the supervised task named `<task>` end, reported as
//!   failed; `<task>:panic` makes it panic instead (`<task>:end` is the default spelled out).
//!   For a [`group`](super::group), `<task>` is the group's name and each member ends.
//! - `KUBE_RETENTION_FAULT_AFTER_SECONDS=<n>`: after `n` seconds from the task's start (default
//!   0).
//!
//! A thread cannot be interrupted: a thread named by the fault waits out the delay and then
//! ends or panics instead of doing its work. The names of each binary's tasks are listed where
//! it starts them (the controller's `app` module, the webhook's `main`).
//!
//! For instance `KUBE_RETENTION_FAULT=cel-evaluator:panic KUBE_RETENTION_FAULT_AFTER_SECONDS=30`
//! on a controller built with `--features fault-injection` makes its CEL thread panic 30 s after
//! start; the controller then exits non-zero.

use std::fmt;
use std::future::Future;
use std::time::Duration;

/// The variable naming the task to fail.
pub const FAULT: &str = "KUBE_RETENTION_FAULT";
/// The variable holding the delay before the fault, in seconds.
pub const FAULT_AFTER_SECONDS: &str = "KUBE_RETENTION_FAULT_AFTER_SECONDS";

/// A task ended by an injected fault.
#[derive(Debug)]
pub struct Injected {
    task: &'static str,
}

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{FAULT} ended {}", self.task)
    }
}

/// A fault to inject: which task, how, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub task: String,
    pub panic: bool,
    pub after: Duration,
}

/// What is wrong with the fault the environment names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("{FAULT}: {0:?} is neither end nor panic")]
    How(String),
    #[error("{FAULT}: no task named")]
    NoTask,
    #[error("{FAULT_AFTER_SECONDS}: {0:?} is not whole seconds")]
    After(String),
}

impl Fault {
    /// The fault that [`FAULT`]'s value `fault` and [`FAULT_AFTER_SECONDS`]'s value `after` say,
    /// or which is wrong and why.
    pub fn parse(fault: &str, after: Option<&str>) -> Result<Self, FaultError> {
        let (task, how) = fault.split_once(':').unwrap_or((fault, "end"));
        let panic = match how {
            "end" => false,
            "panic" => true,
            other => return Err(FaultError::How(other.to_owned())),
        };
        if task.is_empty() {
            return Err(FaultError::NoTask);
        }
        let after = match after.map(str::trim).filter(|after| !after.is_empty()) {
            None => Duration::ZERO,
            Some(seconds) => seconds
                .parse()
                .map(Duration::from_secs)
                .map_err(|_| FaultError::After(seconds.to_owned()))?,
        };
        Ok(Self {
            task: task.to_owned(),
            panic,
            after,
        })
    }

    /// Runs `future` as the task `task` until the fault strikes.
    #[cfg(feature = "fault-injection")]
    pub async fn inject<F: Future>(
        &self,
        task: &'static str,
        future: F,
    ) -> Result<F::Output, Injected> {
        tokio::select! {
            output = future => Ok(output),
            () = tokio::time::sleep(self.after) => Err(self.strike(task)),
        }
    }

    /// Panics, or answers the task's end after logging it.
    #[cfg(feature = "fault-injection")]
    fn strike(&self, task: &'static str) -> Injected {
        if self.panic {
            panic!("{FAULT} made {task} panic");
        }
        tracing::warn!(task, "{FAULT}: ending the task");
        Injected { task }
    }
}

/// The fault planned for `task` by the environment, read once.
#[cfg(feature = "fault-injection")]
fn planned(task: &str) -> Option<Fault> {
    static PLAN: std::sync::OnceLock<Option<Fault>> = std::sync::OnceLock::new();
    let plan = PLAN.get_or_init(|| {
        let fault = std::env::var(FAULT).ok()?;
        let after = std::env::var(FAULT_AFTER_SECONDS).ok();
        match Fault::parse(&fault, after.as_deref()) {
            Ok(fault) => Some(fault),
            Err(error) => {
                tracing::error!(%error, "reading the fault to inject; none is");
                None
            }
        }
    });
    let fault = plan.as_ref().filter(|fault| fault.task == task)?;
    tracing::warn!(task, after = ?fault.after, panic = fault.panic, "fault injection armed");
    Some(fault.clone())
}

/// Runs `future` as the task `task`, ended by the environment's fault if it names the task.
#[cfg(feature = "fault-injection")]
pub(super) async fn inject<F: Future>(
    task: &'static str,
    future: F,
) -> Result<F::Output, Injected> {
    match planned(task) {
        Some(fault) => fault.inject(task, future).await,
        None => Ok(future.await),
    }
}

/// Runs `future` as the task `task` (no faults in this build).
#[cfg(not(feature = "fault-injection"))]
pub(super) async fn inject<F: Future>(
    _task: &'static str,
    future: F,
) -> Result<F::Output, Injected> {
    Ok(future.await)
}

/// Runs `body` as the thread `task`, or in its place the environment's fault if it names it.
#[cfg(feature = "fault-injection")]
pub(super) fn inject_blocking(task: &'static str, body: impl FnOnce()) -> Result<(), Injected> {
    match planned(task) {
        Some(fault) => {
            std::thread::sleep(fault.after);
            Err(fault.strike(task))
        }
        None => {
            body();
            Ok(())
        }
    }
}

/// Runs `body` as the thread `task` (no faults in this build).
#[cfg(not(feature = "fault-injection"))]
pub(super) fn inject_blocking(_task: &'static str, body: impl FnOnce()) -> Result<(), Injected> {
    body();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_names_a_task_how_and_when() {
        let parsed = |fault: &str, after: Option<&str>| {
            Fault::parse(fault, after).map_err(|error| error.to_string())
        };
        let fault = |task: &str, panic: bool, seconds: u64| Fault {
            task: task.to_owned(),
            panic,
            after: Duration::from_secs(seconds),
        };
        assert_eq!(parsed("watches", None), Ok(fault("watches", false, 0)));
        assert_eq!(
            parsed("watches:end", Some("")),
            Ok(fault("watches", false, 0))
        );
        assert_eq!(
            parsed("cel-evaluator:panic", Some(" 30 ")),
            Ok(fault("cel-evaluator", true, 30))
        );
        assert_eq!(
            parsed("watches:explode", None),
            Err("KUBE_RETENTION_FAULT: \"explode\" is neither end nor panic".to_owned())
        );
        assert_eq!(
            parsed(":panic", None),
            Err("KUBE_RETENTION_FAULT: no task named".to_owned())
        );
        assert_eq!(
            parsed("watches", Some("1.5")),
            Err("KUBE_RETENTION_FAULT_AFTER_SECONDS: \"1.5\" is not whole seconds".to_owned())
        );
    }

    #[cfg(feature = "fault-injection")]
    #[tokio::test(start_paused = true)]
    async fn an_injected_fault_ends_the_task_after_its_delay() {
        let fault = Fault::parse("pending", Some("30")).unwrap_or_else(|error| panic!("{error}"));
        let started = tokio::time::Instant::now();
        let ended = fault.inject("pending", std::future::pending::<()>()).await;
        let injected = ended.err().map(|injected| injected.to_string());
        assert_eq!(
            injected.as_deref(),
            Some("KUBE_RETENTION_FAULT ended pending")
        );
        assert_eq!(started.elapsed(), Duration::from_secs(30));

        let quick = fault.inject("pending", async { 7 }).await;
        assert_eq!(
            quick.ok(),
            Some(7),
            "a task that returns first is not struck"
        );
    }

    #[cfg(feature = "fault-injection")]
    #[tokio::test(start_paused = true)]
    async fn an_injected_panic_panics_in_the_task() {
        let fault = Fault::parse("pending:panic", None).unwrap_or_else(|error| panic!("{error}"));
        let task = tokio::spawn(async move {
            fault
                .inject("pending", std::future::pending::<()>())
                .await
                .is_ok()
        });
        let error = task.await.err().map(|error| error.is_panic());
        assert_eq!(error, Some(true));
    }
}
