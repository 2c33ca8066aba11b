//! A steady trickle of admission requests, for tests that disturb the webhook (certificate
//! rotation, evictions, upgrades) and must show admission never failed meanwhile: a dry-run
//! create of a BuildRun every 200 ms, which the API server sends through both webhooks (their
//! failure policy for runs is Fail, so any webhook outage is an error here).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{TestNamespace, object, shipwright};

/// What the trickle saw: requests answered, and each failure's time and message.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub answered: usize,
    pub failures: Vec<(jiff::Timestamp, String)>,
}

impl Tally {
    /// How many failed of how many, and the first and last failure (not all: hundreds of
    /// identical messages help nobody).
    pub fn summary(&self) -> String {
        let first = self.failures.first();
        let last = self.failures.last();
        format!(
            "{} times of {}; first {first:?}; last {last:?}",
            self.failures.len(),
            self.failures.len() + self.answered
        )
    }
}

pub struct Trickle {
    tally: Arc<Mutex<Tally>>,
    task: tokio::task::JoinHandle<()>,
}

impl Trickle {
    pub fn start(ns: &TestNamespace) -> Result<Self> {
        let runs = ns.dynamic(&shipwright("BuildRun"));
        let run = object(
            &shipwright("BuildRun"),
            json!({"metadata": {"name": "trickle", "labels": {"build.shipwright.io/name": "app"}},
                   "spec": {"build": {"name": "app"}, "retention": {"ttlAfterSucceeded": "1h"}}}),
        )?;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let counted = tally.clone();
        let task = tokio::spawn(async move {
            let dry_run = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            loop {
                let outcome = runs.create(&dry_run, &run).await.map(drop);
                record(&counted, outcome.map_err(|error| error.to_string()));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Ok(Self { tally, task })
    }

    /// Stops the trickle and answers what it saw.
    pub fn stop(self) -> Tally {
        self.task.abort();
        self.tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

fn record(tally: &Mutex<Tally>, outcome: Result<(), String>) {
    let mut tally = tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match outcome {
        Ok(()) => tally.answered += 1,
        Err(error) => tally.failures.push((jiff::Timestamp::now(), error)),
    }
}
