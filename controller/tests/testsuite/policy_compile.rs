//! A policy's expressions compiled on the evaluator, not on the loop that schedules deletions:
//! one step, in its namespace's lane (a ClusterRetentionPolicy's in a lane of its own), with
//! every error of an invalid spec; a namespace in debt compiles only once its debt is paid,
//! while another namespace's policy goes first; edits faster than they compile coalesce into
//! the latest, and what the loop holds ([`Compiles`]) takes only the latest generation back,
//! asks again for what the evaluator let go of, and forgets a policy that went.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_retention_common::api::PolicyRules;
use kube_retention_common::policies::{PolicyKey, RulesSource};
use kube_retention_controller::run::Compiles;
use kube_retention_evaluator::compile::CLUSTER_LANE;
use kube_retention_evaluator::{
    Bounds, Compiled, Evaluator, EvaluatorMetrics, PolicyCompile, Progress, Work, WorkKey,
};
use kube_retention_runtime::time_shares::TimeShares;
use kube_retention_state::Approval;
use serde_json::json;
use tokio::sync::mpsc;

fn key(namespace: Option<&str>, name: &str) -> PolicyKey {
    PolicyKey {
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

fn source(spec: serde_json::Value) -> RulesSource {
    let spec: PolicyRules = serde_json::from_value(spec).unwrap();
    RulesSource {
        spec,
        namespace_selector: None,
    }
}

fn valid() -> RulesSource {
    source(json!({
        "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
        "match": "object.metadata.name.startsWith('nightly-')",
        "ttlAfterSucceeded": "1h"
    }))
}

#[test]
fn a_policy_compiles_in_one_step_in_its_namespace_lane() {
    let (results, mut compiled) = mpsc::unbounded_channel();
    let mut work: Box<dyn Work> = Box::new(PolicyCompile::policy(
        key(Some("team-a"), "nightly"),
        7,
        valid(),
        results,
    ));
    assert_eq!(&**work.namespace(), "team-a");
    assert_eq!(work.key(), WorkKey::Policy(Arc::from("nightly")));
    assert!(work.weight() > 0, "a queued compilation weighs its spec");
    assert_eq!(
        work.step(&mut crate::support::sandbox()),
        Progress::Done,
        "one step compiles it all"
    );
    work.finish();
    let Compiled {
        key: came,
        seq,
        read,
    } = compiled.try_recv().unwrap();
    assert_eq!((came, seq), (key(Some("team-a"), "nightly"), 7));
    let (rules, errors) = read.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(rules.has_expressions(), "its match compiled");
}

#[test]
fn an_invalid_policy_comes_back_with_every_error() {
    let (results, mut compiled) = mpsc::unbounded_channel();
    let bad = source(json!({
        "resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
        "match": "object.metadata.name.startsWith(",
        "holdWhile": "'yes'",
        "ttlAfterSucceeded": "soon"
    }));
    let mut work: Box<dyn Work> = Box::new(PolicyCompile::policy(
        key(Some("team-a"), "bad"),
        1,
        bad,
        results,
    ));
    work.step(&mut crate::support::sandbox());
    work.finish();
    let (_, errors) = compiled.try_recv().unwrap().read.unwrap();
    let fields: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.match", "spec.ttlAfterSucceeded", "spec.holdWhile"],
        "{errors:?}"
    );
}

#[test]
fn a_cluster_policy_is_compiled_in_a_lane_no_namespace_has() {
    let (results, _compiled) = mpsc::unbounded_channel();
    let work = PolicyCompile::policy(key(None, "everywhere"), 1, valid(), results);
    assert_eq!(work.namespace(), &*CLUSTER_LANE);
    assert!(CLUSTER_LANE.is_empty(), "no namespace is named \"\"");
}

#[test]
fn a_shed_compilation_weighs_nothing_and_asks_for_its_policy_again() {
    let (results, mut compiled) = mpsc::unbounded_channel();
    let work: Box<dyn Work> = Box::new(PolicyCompile::policy(
        key(Some("team-a"), "nightly"),
        3,
        valid(),
        results,
    ));
    let mut token = work.shed();
    assert_eq!(token.weight(), 0);
    assert_eq!(token.key(), WorkKey::Policy(Arc::from("nightly")));
    assert_eq!(token.step(&mut crate::support::sandbox()), Progress::Done);
    token.finish();
    let asked = compiled.try_recv().unwrap();
    assert_eq!((asked.seq, asked.read.is_none()), (3, true));
}

/// An evaluator whose `team-a` owes `debt` of its share (a twentieth of a core).
fn evaluator_owing(debt: Duration) -> (Evaluator, EvaluatorMetrics, Instant, impl Sized) {
    let metrics = EvaluatorMetrics::default();
    let mut shares = TimeShares::new(0.05, Duration::ZERO);
    let now = Instant::now();
    shares.charge(&Arc::from("team-a"), debt.mul_f64(0.05), now);
    let (evaluator, thread) = Evaluator::spawn_with(
        metrics.clone(),
        shares,
        Bounds::default(),
        crate::support::evaluator_process(),
    )
    .unwrap();
    (evaluator, metrics, now + debt, thread)
}

#[tokio::test]
async fn a_namespace_in_debt_compiles_once_paid_its_edits_coalesced_and_others_go_first() {
    let (evaluator, metrics, paid, _thread) = evaluator_owing(Duration::from_millis(500));
    let (results, mut compiled) = mpsc::unbounded_channel();
    let nightly = key(Some("team-a"), "nightly");
    for seq in 1..=3 {
        let work = PolicyCompile::policy(nightly.clone(), seq, valid(), results.clone());
        assert!(evaluator.submit(Box::new(work)));
    }
    let other = key(Some("team-b"), "weekly");
    let work = PolicyCompile::policy(other.clone(), 4, valid(), results.clone());
    assert!(evaluator.submit(Box::new(work)));
    let within = Duration::from_secs(30);
    let first = tokio::time::timeout(within, compiled.recv()).await.unwrap();
    assert_eq!(
        first.unwrap().key,
        other,
        "team-b's policy is not held behind team-a's debt"
    );
    let second = tokio::time::timeout(within, compiled.recv()).await.unwrap();
    let second = second.unwrap();
    assert!(
        Instant::now() >= paid,
        "team-a's compiled only once it paid"
    );
    assert_eq!((second.key, second.seq), (nightly, 3), "the latest edit");
    assert_eq!(
        metrics.superseded.get(),
        2,
        "the two before it were replaced"
    );
    let more = tokio::time::timeout(Duration::from_millis(200), compiled.recv()).await;
    assert!(more.is_err(), "nothing else was compiled: {more:?}");
}

#[tokio::test]
async fn the_loop_takes_back_only_the_latest_generation_and_asks_again_for_what_was_shed() {
    let (evaluator, _thread) = Evaluator::spawn(
        EvaluatorMetrics::default(),
        crate::support::evaluator_program(),
        Default::default(),
    )
    .unwrap();
    let mut compiles = Compiles::new(evaluator);
    let nightly = key(Some("team-a"), "nightly");
    let approval = Approval::default();
    let within = Duration::from_secs(30);
    compiles.submit(nightly.clone(), Some(1), approval, valid());
    let first = tokio::time::timeout(within, compiles.recv()).await.unwrap();
    compiles.submit(nightly.clone(), Some(2), approval, valid());
    assert!(
        compiles.take(first.unwrap()).is_none(),
        "generation 1 came back after generation 2 was sent: dropped"
    );
    let second = tokio::time::timeout(within, compiles.recv()).await.unwrap();
    let second = second.unwrap();
    let seq = second.seq;
    // Word that the evaluator let go of it: sent again, and taken when it comes back.
    let shed = Compiled {
        key: nightly.clone(),
        seq,
        read: None,
    };
    assert!(compiles.take(shed).is_none());
    let again = tokio::time::timeout(within, compiles.recv()).await.unwrap();
    let (pending, taken, (_, errors)) = compiles.take(again.unwrap()).unwrap();
    assert_eq!((pending.generation, taken), (Some(2), nightly.clone()));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(compiles.pending(&nightly).is_none(), "taken");
    // A policy that went while compiling is not taken back.
    compiles.submit(nightly.clone(), Some(3), approval, valid());
    compiles.forget(&nightly);
    let late = tokio::time::timeout(within, compiles.recv()).await.unwrap();
    assert!(compiles.take(late.unwrap()).is_none());
    drop(second);
}
