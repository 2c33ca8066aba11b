//! Tasks a component starts and stops at run time (the controller's watches, one per kind),
//! supervised as one: a member that is aborted, or that returns `Ok` because its owner stopped
//! it, ended as asked; a member that returns `Err` or panics is reported through the group's
//! [`Supervised`] handle, named `group/member`. Once every [`Group`] handle is dropped (its owner
//! is gone) the group has nothing left to report and its handle stays pending.

use std::fmt;
use std::future::Future;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::{Ended, Supervised, TaskEnd, catch_unwind, fault, panic_message};

/// Starts members of the group it was made with.
#[derive(Clone)]
pub struct Group {
    name: &'static str,
    reports: mpsc::UnboundedSender<Ended>,
}

/// A group named `name`: the handle its owner starts members with, and the supervised handle
/// that completes when the first member fails.
pub fn group(name: &'static str) -> (Group, Supervised) {
    let (reports, mut received) = mpsc::unbounded_channel();
    let ended = async move {
        match received.recv().await {
            Some(ended) => ended,
            None => std::future::pending().await,
        }
    };
    let supervised = Supervised {
        name: name.to_owned(),
        ended: Box::pin(ended),
        abort: None,
    };
    (Group { name, reports }, supervised)
}

impl Group {
    /// Spawns `task` as the member `member`: `Ok` means it stopped as asked, `Err` (or a panic)
    /// is reported. The answer aborts it, which is never reported.
    pub fn spawn<E: fmt::Display + Send + 'static>(
        &self,
        member: impl fmt::Display,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) -> AbortHandle {
        let task_name = format!("{}/{member}", self.name);
        let reports = self.reports.clone();
        let group = self.name;
        let handle = tokio::spawn(async move {
            let outcome = match catch_unwind(fault::inject(group, task)).await {
                Ok(Ok(Ok(()))) => return,
                Ok(Ok(Err(error))) => TaskEnd::Failed(error.to_string()),
                Ok(Err(injected)) => TaskEnd::Failed(injected.to_string()),
                Err(payload) => TaskEnd::Panicked(panic_message(payload.as_ref())),
            };
            let ended = Ended {
                task: task_name,
                outcome,
            };
            reports.send(ended).ok();
        });
        handle.abort_handle()
    }
}
