//! Prune finished Kubernetes objects from your own operator — what operator-lib's `prune`
//! package gives Go operator authors, with kube-retention's finish rules.
//!
//! Choose kinds, namespaces and label selectors ([`Target`]), one or more [`Strategy`]
//! (max-count, max-age, your own), optionally override or extend the per-kind finish
//! [`Rules`], veto objects with a hook, and either [`Pruner::plan`] (a dry run) or
//! [`Pruner::prune`] (deletes with uid preconditions). Running objects and objects annotated
//! `retention.dev/keep: "true"` are never pruned.
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
//!         "metadata": {"name": name, "namespace": "ci", "uid": name},
//!         "status": {"completionTime": finished,
//!                    "conditions": [{"type": "Complete", "status": "True"}]}
//!     })).unwrap()
//! };
//! let jobs = [
//!     job("nightly-1", "2026-11-20T00:00:00Z"),
//!     job("nightly-2", "2026-11-21T00:00:00Z"),
//!     job("nightly-3", "2026-11-22T00:00:00Z"),
//! ];
//! let settings = Settings {
//!     strategies: vec![Strategy::MaxCount(2), Strategy::MaxAge(Duration::from_secs(7 * 24 * 3600))],
//!     ..Settings::default()
//! };
//! let now = "2026-11-22T12:00:00Z".parse().unwrap();
//! let plan = plan(&jobs, &settings, now);
//! let pruned: Vec<&str> = plan.to_prune().map(|planned| planned.name.as_str()).collect();
//! assert_eq!(pruned, ["nightly-1"]);
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
//!     .strategy(Strategy::MaxCount(5))
//!     .before_delete(|job| match job.metadata.labels.as_ref().and_then(|l| l.get("audit")) {
//!         Some(_) => Err("held for audit".into()),
//!         None => Ok(()),
//!     })
//!     .prune()
//!     .await?;
//! println!("deleted {:?}", pruned.deleted);
//! # Ok(()) }
//! ```

mod error;
mod plan;
mod pruner;
mod rules;

pub use error::{Error, Result};
pub use plan::{Candidate, ChooseFn, Decision, HookFn, Plan, Planned, Settings, Strategy, plan};
pub use pruner::{Pruned, Pruner, Target};
pub use rules::{FinishFn, Rules};
