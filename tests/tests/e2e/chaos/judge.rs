//! The judge: watches a kind in the test's namespace and records every deletion with the
//! object's last state, then rules with the retention model on that state. A deletion is wrong
//! when the object was unfinished, kept, had no deadline, or its deadline had not come; an object
//! still there well after its deadline is missed. Deletions the scenario made itself are its own.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube_retention_common::{Expiry, Progress};
use serde_json::Value;

/// How early a deletion may be observed (whole-second timestamps, watch latency).
const EARLY: SignedDuration = SignedDuration::from_millis(50);
/// How long past its deadline an object may still stand before it counts as missed.
const LATE: SignedDuration = SignedDuration::from_secs(5);

struct Deletion {
    name: String,
    uid: String,
    at: Timestamp,
    last: Value,
}

#[derive(Default)]
struct Book {
    deletions: Vec<Deletion>,
    seen: HashSet<String>,
    by_scenario: HashSet<String>,
}

pub struct Ledger {
    book: Arc<Mutex<Book>>,
    resource: ApiResource,
    api: Api<DynamicObject>,
    task: tokio::task::JoinHandle<()>,
}

/// What the judge found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub objects: usize,
    pub wrong: Vec<String>,
    pub missed: Vec<String>,
    /// Deadline to deletion, seconds, for deletions by kube-retention.
    pub delays: Vec<f64>,
}

impl Verdict {
    pub fn p99(&self) -> Option<f64> {
        self.quantile(0.99)
    }

    /// The delay a fraction `q` of the deletions did not exceed (nearest rank).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let mut delays = self.delays.clone();
        delays.sort_by(f64::total_cmp);
        let index = (delays.len() as f64 * q).ceil() as usize;
        delays.get(index.saturating_sub(1)).copied()
    }

    /// One verdict over the objects of both.
    pub fn merge(mut self, other: Verdict) -> Verdict {
        self.objects += other.objects;
        self.wrong.extend(other.wrong);
        self.missed.extend(other.missed);
        self.delays.extend(other.delays);
        self
    }

    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        if !self.wrong.is_empty() {
            parts.push(format!("wrong: {}", sample(&self.wrong)));
        }
        if !self.missed.is_empty() {
            parts.push(format!("missed: {}", sample(&self.missed)));
        }
        parts.join("; ")
    }
}

fn sample(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    format!(
        "{}{}",
        shown.join(", "),
        if names.len() > 5 { ", …" } else { "" }
    )
}

/// The object's JSON with apiVersion and kind, which list items of built-in kinds lack.
fn typed(object: &DynamicObject, resource: &ApiResource) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), resource.api_version.clone().into());
        map.insert("kind".into(), resource.kind.clone().into());
    }
    value
}

impl Ledger {
    /// Starts watching `resource` in `api`'s namespace; call before creating objects.
    pub async fn start(api: Api<DynamicObject>, resource: ApiResource) -> Self {
        let book = Arc::new(Mutex::new(Book::default()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let recorder = book.clone();
        let typed_resource = resource.clone();
        let stream = watcher::watcher(api.clone(), watcher::Config::default()).default_backoff();
        let task = tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let Ok(mut book) = recorder.lock() else {
                    return;
                };
                match event {
                    Ok(Event::InitApply(object) | Event::Apply(object)) => {
                        book.seen
                            .insert(object.metadata.uid.clone().unwrap_or_default());
                    }
                    Ok(Event::Delete(object)) => {
                        let uid = object.metadata.uid.clone().unwrap_or_default();
                        book.seen.insert(uid.clone());
                        book.deletions.push(Deletion {
                            name: object.metadata.name.clone().unwrap_or_default(),
                            uid,
                            at: Timestamp::now(),
                            last: typed(&object, &typed_resource),
                        });
                    }
                    Ok(Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            tx.send(()).ok();
                        }
                    }
                    Ok(Event::Init) | Err(_) => {}
                }
            }
        });
        listed.await.ok();
        Self {
            book,
            resource,
            api,
            task,
        }
    }

    /// Every deletion seen so far: name, uid, and when the watch told of it.
    pub fn deletions(&self) -> anyhow::Result<Vec<(String, String, Timestamp)>> {
        let book = self
            .book
            .lock()
            .map_err(|_| anyhow::anyhow!("ledger lock"))?;
        Ok(book
            .deletions
            .iter()
            .map(|deletion| (deletion.name.clone(), deletion.uid.clone(), deletion.at))
            .collect())
    }

    /// Waits until the watch has told of the deletion of every object in `names`, or fails
    /// after `timeout`. Reads what the watch has recorded, so that waiting costs the API
    /// server nothing: a scenario that listed its objects every 50 ms to see them gone loaded
    /// the API server (and this process) with lists of thousands of objects, and the delays it
    /// measured with it.
    pub async fn until_deleted(
        &self,
        names: &HashSet<String>,
        timeout: std::time::Duration,
        what: &str,
    ) -> anyhow::Result<()> {
        let left = || -> anyhow::Result<usize> {
            let book = self
                .book
                .lock()
                .map_err(|_| anyhow::anyhow!("ledger lock"))?;
            let deleted: HashSet<&str> = book.deletions.iter().map(|d| d.name.as_str()).collect();
            Ok(names
                .iter()
                .filter(|name| !deleted.contains(name.as_str()))
                .count())
        };
        crate::workloads::eventually(timeout, what, || async { Ok(left()? == 0) })
            .await
            .with_context(|| match left() {
                Ok(left) => format!("{left} of {} not deleted", names.len()),
                Err(error) => error.to_string(),
            })
    }

    /// The scenario deleted the object with `uid` itself: not kube-retention's to answer for.
    pub fn deleted_by_scenario(&self, uid: &str) {
        if let Ok(mut book) = self.book.lock() {
            book.by_scenario.insert(uid.to_owned());
        }
    }

    /// Rules on every deletion so far and on every object still there at `now`. `must_stay`
    /// names objects the scenario knows must not be deleted whatever their state says.
    pub async fn verdict(&self, must_stay: &HashSet<String>) -> anyhow::Result<Verdict> {
        let now = Timestamp::now();
        let remaining = self.api.list(&Default::default()).await?.items;
        let book = self
            .book
            .lock()
            .map_err(|_| anyhow::anyhow!("ledger lock"))?;
        let mut verdict = Verdict {
            objects: book.seen.len(),
            ..Verdict::default()
        };
        for deletion in &book.deletions {
            if book.by_scenario.contains(&deletion.uid) {
                continue;
            }
            let allowed = allowed_at(&deletion.last, deletion.at);
            match allowed {
                Some(deadline) if !must_stay.contains(&deletion.name) => {
                    let delay = deletion.at.duration_since(deadline);
                    verdict.delays.push(delay.as_secs_f64().max(0.0));
                }
                _ => verdict.wrong.push(deletion.name.clone()),
            }
        }
        for object in &remaining {
            let value = typed(object, &self.resource);
            let deleting = object.metadata.deletion_timestamp.is_some();
            if let Some(deadline) = allowed_at(&value, now)
                && !deleting
                && deadline + LATE < now
            {
                verdict
                    .missed
                    .push(object.metadata.name.clone().unwrap_or_default());
            }
        }
        Ok(verdict)
    }
}

/// The deadline that allowed deleting `object` by `at`, if any: finished (or not a run), not
/// kept, with a deadline no later than `at` (less the observation slack).
fn allowed_at(object: &Value, at: Timestamp) -> Option<Timestamp> {
    if kube_retention_common::kinds::Registry::progress_of(object) == Progress::Running {
        return None;
    }
    Expiry::of(object, at)
        .deadline()
        .filter(|deadline| *deadline <= at + EARLY)
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.task.abort();
    }
}
