//! Cleaners' conditions judged as evaluator work: one condition at one time per turn, so a
//! Cleaner's monotonic search over sixteen conditions (hundreds of evaluations) holds another
//! namespace's judgement up by one step, not by the whole search; a verdict counts only for the
//! latest evaluation of its Cleaner; and a shed evaluation is asked for again.

use crate::support;

use kube_retention_cleaners::book::{Book, Prepared};
use kube_retention_cleaners::judging::{CleanerOutcome, CleanerWork, Pending};
use kube_retention_common::cleaner::{Cleaner, Verdict};
use kube_retention_evaluator::{Backlog, Bounds, Work};
use serde_json::json;
use support::{at, cleaner_key, cleaners_book};
use tokio::sync::mpsc;

const NOW: &str = "2026-11-22T12:00:00Z";

fn cleaner(namespace: &str, conditions: &[String], monotonic: bool) -> Cleaner {
    serde_json::from_value(json!({
        "apiVersion": "retention.dev/v1alpha1", "kind": "Cleaner",
        "metadata": {"name": "c", "namespace": namespace, "uid": format!("uid-{namespace}"),
                     "creationTimestamp": "2026-11-22T10:00:00Z"},
        "spec": {
            "retry": {"period": "24h", "monotonic": monotonic},
            "targets": [{"name": "settings", "includeWhenEvaluating": true,
                         "reference": {"version": "v1", "kind": "ConfigMap"}}],
            "conditions": conditions
        }
    }))
    .unwrap()
}

/// The Cleaner in `namespace` prepared, its spec compiled first (as the evaluator would).
fn prepared(book: &mut Book, namespace: &str) -> Pending {
    loop {
        match book.prepare(&cleaner_key(namespace), at(NOW)).unwrap() {
            Prepared::Conditions(pending) => return pending,
            Prepared::Decided(evaluation) => panic!("decided at once: {:?}", evaluation.verdict),
            Prepared::Compile(request) => {
                book.compiled(&request.key, request.seq, request.compile());
            }
        }
    }
}

/// Sixteen conditions turning true together at 17:39.
fn search() -> Vec<String> {
    (0..16)
        .map(|n| {
            format!(
                "time >= timestamp(\"2026-11-22T17:39:00Z\") && settings.items.size() >= {}",
                n - 16
            )
        })
        .collect()
}

#[test]
fn a_long_search_holds_another_namespace_up_by_one_step_not_by_its_whole() {
    let slow = cleaner("a", &search(), true);
    let quick = cleaner("b", &["settings.items.size() == 0".to_owned()], false);
    let mut book = cleaners_book(&[slow, quick]);
    let (results, mut judged) = mpsc::unbounded_channel();
    let mut backlog = Backlog::new(Bounds::default());
    let mut sandbox = crate::support::sandbox();
    backlog.push(Box::new(CleanerWork::new(
        prepared(&mut book, "a"),
        results.clone(),
    )));
    backlog.push(Box::new(CleanerWork::new(
        prepared(&mut book, "b"),
        results,
    )));
    let mut steps = 0;
    let mut order = Vec::new();
    while let Some(turn) = backlog.step(|_| true, &mut sandbox) {
        steps += 1;
        if let Some(done) = turn.done {
            done.finish();
            let Ok(CleanerOutcome::Judged { pending, verdict }) = judged.try_recv() else {
                panic!("a verdict");
            };
            let namespace = pending.key.namespace.clone();
            let evaluation = book
                .conclude(*pending, verdict, at(NOW))
                .expect("the latest");
            order.push((namespace, steps, evaluation.verdict));
        }
    }
    let [(first, after, quick), (second, total, slow)] = order.as_slice() else {
        panic!("{order:?}");
    };
    assert_eq!((first.as_str(), second.as_str()), ("b", "a"));
    assert_eq!(*quick, Ok(Verdict::Clean));
    assert!(
        *after <= 4,
        "b went after {after} steps: a's conversion and one condition"
    );
    assert!(
        *total > 100,
        "a's search took {total} steps, each its own turn"
    );
    let Ok(Verdict::Wait {
        until, found: true, ..
    }) = slow
    else {
        panic!("{slow:?}");
    };
    assert!(until >= &at("2026-11-22T17:39:00Z"));
}

#[test]
fn only_the_latest_evaluation_of_a_cleaner_counts_and_a_shed_one_is_asked_for_again() {
    let mut book = cleaners_book(&[cleaner(
        "a",
        &["settings.items.size() == 0".to_owned()],
        false,
    )]);
    let (results, mut judged) = mpsc::unbounded_channel();
    let first = prepared(&mut book, "a");
    let second = prepared(&mut book, "a");
    assert_ne!(first.seq, second.seq);
    let stale = CleanerWork::new(first, results.clone());
    let mut backlog = Backlog::new(Bounds::default());
    let mut sandbox = crate::support::sandbox();
    backlog.push(Box::new(stale));
    while let Some(turn) = backlog.step(|_| true, &mut sandbox) {
        turn.done.into_iter().for_each(Work::finish);
    }
    let Ok(CleanerOutcome::Judged { pending, verdict }) = judged.try_recv() else {
        panic!("a verdict");
    };
    assert!(
        book.conclude(*pending, verdict, at(NOW)).is_none(),
        "superseded by the second"
    );
    let (key, seq) = (second.key.clone(), second.seq);
    let shed = Box::new(CleanerWork::new(second, results)).shed();
    assert_eq!(shed.weight(), 0);
    shed.finish();
    let Ok(CleanerOutcome::Shed {
        key: asked,
        seq: asked_seq,
    }) = judged.try_recv()
    else {
        panic!("asked again");
    };
    assert_eq!((&asked, asked_seq), (&key, seq));
    assert!(
        book.evaluating(&asked, asked_seq),
        "still the latest: prepared again"
    );
    let third = prepared(&mut book, "a");
    assert!(!book.evaluating(&asked, asked_seq));
    assert!(book.evaluating(&key, third.seq));
}

#[test]
fn a_verdict_for_a_replica_that_no_longer_leads_is_dropped_and_the_cleaner_woken() {
    let mut book = cleaners_book(&[cleaner(
        "a",
        &["settings.items.size() == 0".to_owned()],
        false,
    )]);
    assert_eq!(book.take_due(at(NOW)), vec![cleaner_key("a")]);
    let pending = prepared(&mut book, "a");
    book.abandon(&pending.key, pending.seq);
    assert!(!book.evaluating(&pending.key, pending.seq));
    assert_eq!(
        book.take_due(at(NOW)),
        vec![cleaner_key("a")],
        "evaluated again when it leads"
    );
}

#[test]
fn a_verdict_on_targets_that_changed_since_is_reported_but_decides_nothing() {
    let mut book = cleaners_book(&[cleaner(
        "a",
        &["settings.items.size() > 0".to_owned()],
        false,
    )]);
    let first = prepared(&mut book, "a");
    let second = prepared(&mut book, "a");
    let (results, mut judged) = mpsc::unbounded_channel();
    let stale = Box::new(CleanerWork::new(first, results));
    let mut backlog = Backlog::new(Bounds::default());
    let mut sandbox = crate::support::sandbox();
    backlog.push(stale);
    while let Some(turn) = backlog.step(|_| true, &mut sandbox) {
        turn.done.into_iter().for_each(Work::finish);
    }
    let Ok(CleanerOutcome::Judged { pending, verdict }) = judged.try_recv() else {
        panic!("a verdict");
    };
    let reported = book
        .conclude(*pending, verdict, at(NOW))
        .expect("reported: its targets changed, but it says what its condition said");
    assert!(
        matches!(reported.verdict, Ok(Verdict::Wait { unmet: 0, .. })),
        "{:?}",
        reported.verdict
    );
    assert!(reported.clean.is_none());
    assert!(
        book.evaluating(&second.key, second.seq),
        "the later evaluation still decides"
    );
    assert_eq!(
        book.next_deadline(),
        None,
        "and nothing was scheduled by the stale one"
    );
}
