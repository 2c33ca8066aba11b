//! A Cleaner's conditions compiled on the evaluator, not on the Cleaners' loop: the book asks
//! once for a spec's judge when the Cleaner is first evaluated (so a replica that does not lead
//! compiles nothing), keeps only the judge of its latest request, wakes the Cleaner when it
//! comes, and asks again for what the evaluator let go of; the work compiles in one step in its
//! namespace's lane; a namespace in debt compiles only once paid, while another namespace's
//! Cleaner goes first, and requests faster than they compile coalesce into the latest.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube_retention_cleaners::book::{Book, CleanerKey, CompileRequest, Prepared};
use kube_retention_cleaners::compile::cleaner_compile;
use kube_retention_cleaners::judging::CleanerOutcome;
use kube_retention_common::cleaner::Cleaner;
use kube_retention_evaluator::{Bounds, Evaluator, EvaluatorMetrics, Progress, Work, WorkKey};
use kube_retention_runtime::time_shares::TimeShares;
use serde_json::json;
use support::{cleaner_key, cleaners_book};
use tokio::sync::mpsc;

const NOW: &str = "2026-11-22T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn cleaner(namespace: &str, condition: &str) -> Cleaner {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": "c", "namespace": namespace, "uid": format!("uid-{namespace}"),
                     "creationTimestamp": "2026-11-22T10:00:00Z"},
        "spec": {"targets": [{"name": "settings", "includeWhenEvaluating": true,
                              "reference": {"version": "v1", "kind": "ConfigMap"}}],
                 "conditions": [condition]}
    }))
    .unwrap()
}

fn asked(book: &mut Book, key: &CleanerKey) -> CompileRequest {
    match book.prepare(key, now()) {
        Some(Prepared::Compile(request)) => request,
        Some(Prepared::Decided(evaluation)) => panic!("decided: {:?}", evaluation.verdict),
        Some(Prepared::Conditions(_)) => panic!("judged before it was compiled"),
        None => panic!("nothing asked"),
    }
}

#[test]
fn the_book_asks_once_keeps_the_latest_judge_and_wakes_the_cleaner_with_it() {
    let team_a = cleaner_key("team-a");
    let mut book = cleaners_book(&[cleaner("team-a", "settings.items.size() == 0")]);
    assert_eq!(book.take_due(now()), std::slice::from_ref(&team_a));
    let first = asked(&mut book, &team_a);
    assert!(
        book.prepare(&team_a, now()).is_none(),
        "asked once: the Cleaner waits for its judge"
    );
    // A new spec before the judge came: the older request's judge is dropped.
    book.applied(&cleaner("team-a", "settings.items.size() >= 0"));
    assert_eq!(book.take_due(now()), std::slice::from_ref(&team_a));
    let second = asked(&mut book, &team_a);
    assert!(second.seq > first.seq);
    book.compiled(&team_a, first.seq, first.compile());
    assert!(
        book.take_due(now()).is_empty(),
        "a stale judge wakes nothing"
    );
    assert!(book.prepare(&team_a, now()).is_none(), "and is not kept");
    // The evaluator let go of the request: the same one, asked again.
    let again = book.compile_again(&team_a, second.seq).unwrap();
    assert_eq!((again.seq, &again.spec), (second.seq, &second.spec));
    assert!(book.compile_again(&team_a, first.seq).is_none());
    book.compiled(&team_a, second.seq, again.compile());
    assert_eq!(
        book.take_due(now()),
        std::slice::from_ref(&team_a),
        "woken by its judge"
    );
    assert!(matches!(
        book.prepare(&team_a, now()),
        Some(Prepared::Conditions(_))
    ));
}

#[test]
fn a_spec_without_conditions_has_nothing_to_compile_and_is_judged_at_once() {
    let team_a = cleaner_key("team-a");
    let mut spec = cleaner("team-a", "unused");
    spec.spec.conditions.clear();
    let mut book = cleaners_book(&[spec]);
    book.take_due(now());
    match book.prepare(&team_a, now()) {
        Some(Prepared::Decided(evaluation)) => {
            assert!(evaluation.clean.is_some(), "{:?}", evaluation.verdict);
        }
        _ => panic!("judged at once, nothing asked of the evaluator"),
    }
}

#[test]
fn a_request_let_go_of_while_not_leading_is_asked_for_again_at_the_next_evaluation() {
    let team_a = cleaner_key("team-a");
    let mut book = cleaners_book(&[cleaner("team-a", "settings.items.size() == 0")]);
    book.take_due(now());
    let request = asked(&mut book, &team_a);
    book.compile_abandoned(&team_a, request.seq);
    assert_eq!(book.take_due(now()), std::slice::from_ref(&team_a));
    let again = asked(&mut book, &team_a);
    assert!(again.seq > request.seq);
}

#[test]
fn an_invalid_spec_compiled_is_reported_with_every_error() {
    let team_a = cleaner_key("team-a");
    let mut book = cleaners_book(&[cleaner("team-a", "settings.items.frobnicate()")]);
    book.take_due(now());
    let request = asked(&mut book, &team_a);
    let judge = request.compile();
    assert!(judge.is_err());
    book.compiled(&team_a, request.seq, judge);
    book.take_due(now());
    match book.prepare(&team_a, now()) {
        Some(Prepared::Decided(evaluation)) => {
            let problem = format!("{:?}", evaluation.verdict);
            assert!(problem.contains("spec.conditions[0]"), "{problem}");
        }
        _ => panic!("an invalid spec is decided at once, once compiled"),
    }
}

#[test]
fn the_work_compiles_in_one_step_in_its_namespace_lane_and_its_token_asks_again() {
    let (results, mut outcomes) = mpsc::unbounded_channel();
    let mut book = cleaners_book(&[cleaner("team-a", "settings.items.size() == 0")]);
    book.take_due(now());
    let request = asked(&mut book, &cleaner_key("team-a"));
    let mut work: Box<dyn Work> =
        Box::new(cleaner_compile(request.clone(), results.clone(), false));
    assert_eq!(&**work.namespace(), "team-a");
    assert_eq!(work.key(), WorkKey::CleanerSpec(Arc::from("c")));
    assert!(
        work.weight() > 0,
        "a queued compilation weighs its conditions"
    );
    assert_eq!(
        work.step(&mut crate::support::sandbox()),
        Progress::Done,
        "one step compiles it all"
    );
    work.finish();
    match outcomes.try_recv().unwrap() {
        CleanerOutcome::Compiled { seq, judge, .. } => {
            assert_eq!(seq, request.seq);
            assert!(judge.unwrap().is_ok());
        }
        _ => panic!("not a compilation"),
    }
    let work: Box<dyn Work> = Box::new(cleaner_compile(request.clone(), results, false));
    let mut token = work.shed();
    assert_eq!(token.weight(), 0);
    assert_eq!(token.step(&mut crate::support::sandbox()), Progress::Done);
    token.finish();
    match outcomes.try_recv().unwrap() {
        CleanerOutcome::Compiled { seq, judge, .. } => {
            assert_eq!((seq, judge.is_none()), (request.seq, true), "asks again");
        }
        _ => panic!("not a compilation"),
    }
}

#[tokio::test]
async fn a_namespace_in_debt_compiles_once_paid_coalesced_and_others_go_first() {
    let metrics = EvaluatorMetrics::default();
    let debt = Duration::from_millis(500);
    let mut shares = TimeShares::new(0.05, Duration::ZERO);
    let started = Instant::now();
    shares.charge(&Arc::from("team-a"), debt.mul_f64(0.05), started);
    let (evaluator, _thread) = Evaluator::spawn_with(
        metrics.clone(),
        shares,
        Bounds::default(),
        crate::support::evaluator_process(),
    )
    .unwrap();
    let (results, mut outcomes) = mpsc::unbounded_channel();
    let mut book = cleaners_book(&[
        cleaner("team-a", "settings.items.size() == 0"),
        cleaner("team-b", "settings.items.size() == 0"),
    ]);
    book.take_due(now());
    let team_a = asked(&mut book, &cleaner_key("team-a"));
    for seq in [team_a.seq, team_a.seq + 100, team_a.seq + 200] {
        let request = CompileRequest {
            seq,
            ..team_a.clone()
        };
        let work = cleaner_compile(request, results.clone(), false);
        assert!(evaluator.submit(Box::new(work)));
    }
    let team_b = asked(&mut book, &cleaner_key("team-b"));
    assert!(evaluator.submit(Box::new(cleaner_compile(team_b, results, false))));
    let within = Duration::from_secs(30);
    let received = |outcome: Option<CleanerOutcome>| match outcome.unwrap() {
        CleanerOutcome::Compiled { key, seq, .. } => (key, seq),
        _ => panic!("not a compilation"),
    };
    let first = tokio::time::timeout(within, outcomes.recv()).await.unwrap();
    assert_eq!(
        received(first).0,
        cleaner_key("team-b"),
        "team-b's Cleaner is not held behind team-a's debt"
    );
    let second = tokio::time::timeout(within, outcomes.recv()).await.unwrap();
    assert!(
        Instant::now() >= started + debt,
        "team-a's compiled only once it paid"
    );
    assert_eq!(
        received(second),
        (cleaner_key("team-a"), team_a.seq + 200),
        "the latest"
    );
    assert_eq!(metrics.superseded.get(), 2, "the two before it replaced");
}
