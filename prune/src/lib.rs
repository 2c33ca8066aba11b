//! Prune finished Kubernetes objects from your own operator — what operator-lib's `prune`
//! package gives Go operator authors, with kube-retention's finish rules.
//!
//! Choose kinds, namespaces and label selectors ([`Target`]), one or more [`Strategy`],
//! optionally override or extend the per-kind finish [`FinishRules`], veto objects with a hook, and
//! either [`Pruner::plan`] (a dry run) or [`Pruner::prune`] (deletes with uid preconditions).
//! Running objects, objects annotated `retention.dev/keep: "true"` and objects already being
//! deleted are never pruned.
//!
//! The strategies:
//!
//! - [`Strategy::Limits`] — the controller's count limits (a RetentionPolicy's
//!   `succeededLimit`/`failedLimit`): the newest N succeeded and the newest M failed per kind
//!   and namespace, by creation time, answered by the controller's own function
//!   (`kube_retention_common::limits`), so a prune removes what the controller would.
//! - [`Strategy::NewestFinished`] — the newest N finished per kind and namespace by finish
//!   time, succeeded and failed together: this crate's rule, not the controller's.
//! - [`Strategy::MaxAge`] — those finished longer ago than a duration.
//! - [`Strategy::Custom`] — your own choice.
//!
//! The plan is a pure function, so it can be shown — and tested — without a cluster:
//!
//! ```
//! use std::time::Duration;
//! use kube::api::DynamicObject;
//! use kube_retention_prune::{Settings, Strategy, plan};
//!
//! let job = |name: &str, finished: &str| -> DynamicObject {
//!     serde_json::from_value(serde_json::json!({
//!         "apiVersion": "batch/v1", "kind": "Job",
//!         "metadata": {"name": name, "namespace": "ci", "uid": name,
//!                      "creationTimestamp": finished},
//!         "status": {"completionTime": finished,
//!                    "conditions": [{"type": "Complete", "status": "True"}]}
//!     })).unwrap()
//! };
//! let jobs = [
//!     job("nightly-1", "2026-11-20T00:00:00Z"),
//!     job("nightly-2", "2026-11-21T00:00:00Z"),
//!     job("nightly-3", "2026-11-22T00:00:00Z"),
//! ];
//! let week = Duration::from_secs(7 * 24 * 3600);
//! let settings = Settings {
//!     strategies: vec![Strategy::NewestFinished(2), Strategy::MaxAge(week)],
//!     ..Settings::default()
//! };
//! let now = "2026-11-22T12:00:00Z".parse().unwrap();
//! let by_finish = plan(&jobs, &settings, now);
//! let pruned: Vec<&str> = by_finish.to_prune().map(|planned| planned.name.as_str()).collect();
//! assert_eq!(pruned, ["nightly-1"]);
//!
//! // The controller's rule, as a RetentionPolicy's `succeededLimit: 1`.
//! let limits = Settings {
//!     strategies: vec![Strategy::Limits { succeeded: Some(1), failed: None }],
//!     ..Settings::default()
//! };
//! let by_limits = plan(&jobs, &limits, now);
//! let pruned: Vec<&str> = by_limits.to_prune().map(|planned| planned.name.as_str()).collect();
//! assert_eq!(pruned, ["nightly-1", "nightly-2"]);
//! ```
//!
//! Against a cluster (see `examples/operator.rs` for a whole operator):
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kube::api::{ApiResource, GroupVersionKind};
//! use kube_retention_prune::{Pruner, Strategy, Target};
//!
//! let jobs = ApiResource::from_gvk(&GroupVersionKind::gvk("batch", "v1", "Job"));
//! let pruned = Pruner::new(kube::Client::try_default().await?)
//!     .target(Target::new(jobs).in_namespace("ci").selector("app=nightly"))
//!     .strategy(Strategy::Limits { succeeded: Some(5), failed: Some(5) })
//!     .before_delete(|job| match job.metadata.labels.as_ref().and_then(|l| l.get("audit")) {
//!         Some(_) => Err("held for audit".into()),
//!         None => Ok(()),
//!     })
//!     .prune()
//!     .await?;
//! println!("deleted {:?}", pruned.deleted);
//! # Ok(()) }
//! ```

mod decision;
mod error;
mod plan;
mod pruner;
mod rules;
mod strategy;

pub use error::{Error, Result};
pub use plan::{Decision, HookFn, Plan, Planned, Settings, Veto, plan};
pub use pruner::{Pruned, Pruner, Target};
pub use rules::{FinishFn, FinishRules};
pub use strategy::{ChooseFn, FinishedObject, Strategy};
