//! The safety part of `make bench-peers`: what each deleter does when the object it is about to
//! delete changes at the last moment, reported as observed, not judged by kube-retention's rules:
//!
//! - **TTL removed**: a finished Job whose TTL setting (kube-retention's annotation, Kyverno's
//!   label) is removed 100 ms before its deadline;
//! - **name re-created**: a finished Job its owner deletes a second before its deadline and
//!   creates again under the same name, unfinished: the object there at the deadline is not the
//!   one that was due;
//! - **unfinished**: a Job that never finishes, with the same setting, past the same deadline.
//!
//! Beside them a control, a finished Job left alone, which a deleter must have deleted when the
//! window ends: else its "kept" would say nothing. A DeletingPolicy has no setting on the
//! object to remove, so that case does not apply to it. Each deleter runs alone, started fresh
//! with no request budget, in a namespace of its own; the Jobs are read every 250 ms from the
//! re-creation until the window ends.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_retention_e2e::LocalCluster;
use serde_json::json;

use crate::deleters::{self, Deleter, Work};
use crate::{jobs, kyverno, metrics_port, namespace, now_second, sleep_until};

/// Every Job's TTL, from its finish.
const TTL: SignedDuration = SignedDuration::from_secs(10);
/// How long before the deadline the TTL is removed.
const LAST_MOMENT: SignedDuration = SignedDuration::from_millis(100);
/// How long before the deadline the name is deleted and created again.
const RECREATED_BEFORE: SignedDuration = SignedDuration::from_secs(1);
/// How often the Jobs are read.
const POLL: Duration = Duration::from_millis(250);
/// How long the Jobs are still read once the control is gone: every case was due at the same
/// deadline, so what a deleter does at it, it has done by then.
const AFTER_CONTROL: SignedDuration = SignedDuration::from_secs(20);

/// The cases, in the table's order; each a Job of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Control,
    TtlRemoved,
    Recreated,
    Unfinished,
}

pub const CASES: [Case; 4] = [
    Case::Control,
    Case::TtlRemoved,
    Case::Recreated,
    Case::Unfinished,
];

impl Case {
    fn name(self) -> &'static str {
        match self {
            Self::Control => "control",
            Self::TtlRemoved => "ttl-removed",
            Self::Recreated => "re-created",
            Self::Unfinished => "unfinished",
        }
    }

    fn heading(self) -> &'static str {
        match self {
            Self::Control => "control: finished, left alone",
            Self::TtlRemoved => "TTL removed 100 ms before the deadline",
            Self::Recreated => "name re-created 1 s before the deadline",
            Self::Unfinished => "unfinished past the deadline",
        }
    }

    fn finishes(self) -> bool {
        self != Self::Unfinished
    }
}

/// What became of one case's Job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// There when the window ended.
    Kept,
    /// Seen gone this many seconds from the deadline (negative: before it).
    Deleted { after: f64 },
    /// The deleter has no such setting.
    NotApplicable,
}

impl Outcome {
    fn text(self) -> String {
        match self {
            Self::Kept => "kept".into(),
            Self::Deleted { after } => format!("**deleted**, {after:+.1} s from the deadline"),
            Self::NotApplicable => "n/a: no setting on the object".into(),
        }
    }
}

/// One deleter's outcomes, in [`CASES`]' order.
pub struct Observation {
    pub deleter: Deleter,
    pub outcomes: [Outcome; 4],
}

/// How long after the deadline the Jobs are read at most: a DeletingPolicy runs every minute,
/// so at least once in 75 s.
fn window(deleter: Deleter) -> SignedDuration {
    match deleter {
        Deleter::KyvernoPolicy => SignedDuration::from_secs(75),
        _ => SignedDuration::from_secs(30),
    }
}

/// Each of `deleters`' observation, one after the other.
pub async fn observe(
    cluster: &LocalCluster,
    client: &Client,
    deleters: &[Deleter],
) -> Result<Vec<Observation>> {
    let mut observations = Vec::new();
    for &deleter in deleters {
        println!("safety: {}", deleter.label());
        let observation = observe_one(cluster, client, deleter).await?;
        let outcomes: Vec<String> = observation.outcomes.iter().map(|o| o.text()).collect();
        println!("{}", outcomes.join("; "));
        observations.push(observation);
    }
    Ok(observations)
}

async fn observe_one(
    cluster: &LocalCluster,
    client: &Client,
    deleter: Deleter,
) -> Result<Observation> {
    let ns = format!("bench-safety-{}", deleter.slug());
    namespace(client, &ns).await?;
    let running = deleters::start(cluster, deleter, None, metrics_port()?, Work::Deleting)?;
    tokio::time::sleep(deleter.settle()).await;
    let ttl_seconds = TTL.as_secs() as u32;
    let policy = deleter.deleting_policy(cluster, &ns, ttl_seconds)?;
    let api: Api<Job> = Api::namespaced(client.clone(), &ns);
    for case in CASES {
        api.create(&PostParams::default(), &job(case.name())?)
            .await
            .with_context(|| format!("creating the Job {}", case.name()))?;
    }
    let names = |finished_only: bool| {
        CASES
            .into_iter()
            .filter(move |case| !finished_only || case.finishes())
            .map(|case| case.name().to_owned())
    };
    let finished = now_second();
    jobs::finish_named(client, &ns, names(true), finished).await?;
    let deadline = finished + TTL;
    if deleter == Deleter::KyvernoTtl {
        jobs::label_expiry_named(client, &ns, names(false), deadline).await?;
    }
    if Timestamp::now() > deadline - RECREATED_BEFORE {
        bail!("setting the Jobs up took past {RECREATED_BEFORE:#} before their deadline");
    }
    sleep_until(deadline - RECREATED_BEFORE).await;
    let recreated = recreate(&api, Case::Recreated.name()).await?;
    sleep_until(deadline - LAST_MOMENT).await;
    let settable = deleter != Deleter::KyvernoPolicy;
    if settable {
        remove_ttl(&api, Case::TtlRemoved.name()).await?;
    }
    let gone = watch_until(&api, &recreated, deadline + window(deleter)).await?;
    drop(running);
    if let Some(policy) = policy {
        policy.remove()?;
    }
    crate::remove_namespace(cluster, &ns)?;
    let mut outcomes = gone.map(|gone| match gone {
        Some(at) => Outcome::Deleted {
            after: at.duration_since(deadline).as_secs_f64(),
        },
        None => Outcome::Kept,
    });
    if !settable {
        outcomes[1] = Outcome::NotApplicable;
    }
    if outcomes[0] == Outcome::Kept {
        bail!(
            "{} had not deleted the control Job {:#} after its deadline: see its log in the \
             cluster's state",
            deleter.label(),
            window(deleter)
        );
    }
    Ok(Observation { deleter, outcomes })
}

/// A Job of the bench's form named `name` with kube-retention's TTL (from its finish).
fn job(name: &str) -> Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name,
                     "annotations": {"retention.dev/ttl-after-finished": format!("{}s", TTL.as_secs())}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}}))?)
}

/// Deletes the Job `name` as its owner would and creates it again, unfinished; its new uid.
async fn recreate(api: &Api<Job>, name: &str) -> Result<String> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        // The deleter was first: the name is created again all the same.
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(error).context("deleting the Job to create it again"),
    }
    let started = std::time::Instant::now();
    while api.get_opt(name).await?.is_some() {
        if started.elapsed() > Duration::from_secs(5) {
            bail!("the Job {name} was still there 5 s after its deletion");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let created = api
        .create(&PostParams::default(), &job(name)?)
        .await
        .context("creating the Job again")?;
    created
        .metadata
        .uid
        .context("the Job created again has no uid")
}

/// Removes the Job's TTL, each deleter's way: kube-retention's annotation and Kyverno's label.
async fn remove_ttl(api: &Api<Job>, name: &str) -> Result<()> {
    let patch = json!({"metadata": {
        "annotations": {"retention.dev/ttl-after-finished": null},
        "labels": {kyverno::TTL_LABEL: null}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("removing the Job's TTL")?;
    Ok(())
}

/// When each case's Job was first seen gone, reading them until [`AFTER_CONTROL`] after the
/// control is, or until `end` (the re-created Job is gone once the one with `recreated_uid`
/// is).
async fn watch_until(
    api: &Api<Job>,
    recreated_uid: &str,
    end: Timestamp,
) -> Result<[Option<Timestamp>; 4]> {
    let mut gone: [Option<Timestamp>; 4] = [None; 4];
    let judged = |gone: &[Option<Timestamp>; 4]| {
        gone[0].is_some_and(|control| Timestamp::now() >= control + AFTER_CONTROL)
    };
    while Timestamp::now() < end && !judged(&gone) {
        for (case, gone) in CASES.into_iter().zip(gone.iter_mut()) {
            if gone.is_some() {
                continue;
            }
            let there = api.get_opt(case.name()).await?.is_some_and(|job| {
                case != Case::Recreated || job.metadata.uid.as_deref() == Some(recreated_uid)
            });
            if !there {
                *gone = Some(Timestamp::now());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(gone)
}

/// The `peers-safety` section; `command` is the one that ran it.
pub fn section(observations: &[Observation], command: &str) -> String {
    let headings: Vec<&str> = CASES.iter().map(|case| case.heading()).collect();
    let rows: Vec<String> = observations
        .iter()
        .map(|observation| {
            let cells: Vec<String> = observation.outcomes.iter().map(|o| o.text()).collect();
            format!(
                "| {} | {} |",
                observation.deleter.label(),
                cells.join(" | ")
            )
        })
        .collect();
    format!(
        "### Safety: the last moment\n\n\
         Measured with `{command}` (`bench/src/safety.rs`): per deleter, started fresh\n\
         with no request budget in a namespace of its own, four Jobs with a {ttl} s TTL from\n\
         their finish, said each deleter's way (kube-retention's annotation; Kyverno's TTL label\n\
         with the deadline; the DeletingPolicy's condition). Three finish at once: a control left\n\
         alone; one whose TTL is removed (the annotation and the label) 100 ms before the\n\
         deadline; one its owner deletes 1 s before the deadline and creates again under the same\n\
         name, unfinished, so the object there at the deadline is a new one. The fourth never\n\
         finishes. The Jobs are read every 250 ms until {after} s after the control is gone, or at\n\
         most until 30 s after the deadline (75 s for the DeletingPolicy, which runs every\n\
         minute). Reported as observed, not judged: each tool keeps its own rules.\n\n\
         | deleter | {} |\n\
         | --- |{}\n{}\n",
        headings.join(" | "),
        " --- |".repeat(headings.len()),
        rows.join("\n"),
        ttl = TTL.as_secs(),
        after = AFTER_CONTROL.as_secs(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_has_a_column_per_case_and_a_row_per_deleter() {
        let section = section(
            &[Observation {
                deleter: Deleter::KyvernoPolicy,
                outcomes: [
                    Outcome::Deleted { after: 41.26 },
                    Outcome::NotApplicable,
                    Outcome::Kept,
                    Outcome::Kept,
                ],
            }],
            "make bench-peers",
        );
        assert!(
            section.contains("Measured with `make bench-peers`"),
            "{section}"
        );
        let table: Vec<&str> = section
            .lines()
            .filter(|line| line.starts_with('|'))
            .collect();
        assert_eq!(table.len(), 3, "{section}");
        assert!(table.iter().all(|line| line.matches('|').count() == 6));
        assert_eq!(
            table[2],
            "| Kyverno, a DeletingPolicy every minute | **deleted**, +41.3 s from the deadline | \
             n/a: no setting on the object | kept | kept |"
        );
    }
}
