//! The evaluator's backlog with probe work (no CEL): a step per turn and namespaces in turn, one
//! work per key, the memory bounds kept by shedding the heaviest tenant's waiting work and never
//! work under way, and a namespace charged the CPU time its steps took.

use crate::backlog_support;

use std::sync::Arc;

use backlog_support::{Log, Probe, Seen, drain, probe, roomy, steps_of};
use kube_retention_evaluator::{Backlog, Bounds, Progress, Work, WorkKey, YIELD_EVERY};

#[test]
fn a_long_work_yields_after_every_step() {
    let log = Log::default();
    let mut backlog = Backlog::new(roomy());
    backlog.push(probe(&log, "a", "a-search", 5, (1, 1)));
    backlog.push(probe(&log, "b", "b-1", 1, (1, 1)));
    backlog.push(probe(&log, "b", "b-2", 2, (1, 1)));
    drain(&mut backlog);
    assert_eq!(
        steps_of(&log),
        [
            "a-search", "b-1", "a-search", "b-2", "a-search", "b-2", "a-search", "a-search"
        ]
    );
}

#[test]
fn within_a_namespace_a_long_work_is_set_aside_for_the_others_and_then_finishes() {
    let log = Log::default();
    let mut backlog = Backlog::new(roomy());
    backlog.push(probe(&log, "a", "search", 20, (1, 1)));
    backlog.push(probe(&log, "a", "policy-1", 2, (1, 1)));
    backlog.push(probe(&log, "a", "policy-2", 2, (1, 1)));
    drain(&mut backlog);
    let steps = steps_of(&log);
    let ends: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|seen| matches!(seen, Seen::Done(_)))
        .cloned()
        .collect();
    assert_eq!(
        ends,
        [
            Seen::Done("policy-1".into()),
            Seen::Done("policy-2".into()),
            Seen::Done("search".into())
        ],
        "{steps:?}"
    );
    let first_short = steps.iter().position(|name| name == "policy-1").unwrap();
    assert_eq!(
        first_short, YIELD_EVERY,
        "the search set aside after {YIELD_EVERY} steps"
    );
    assert_eq!(steps.iter().filter(|name| *name == "search").count(), 20);
}

#[test]
fn a_newer_version_of_the_work_under_way_waits_its_turn_and_the_first_finishes() {
    let log = Log::default();
    let mut backlog = Backlog::new(roomy());
    backlog.push(probe(&log, "a", "hot", 3, (1, 1)));
    backlog
        .step(|_| true, &mut crate::support::sandbox())
        .unwrap();
    // Edited while it runs: the version under way still finishes, then the new one runs.
    backlog.push(probe(&log, "a", "hot", 1, (1, 1)));
    assert_eq!(backlog.len(), 2);
    drain(&mut backlog);
    assert_eq!(steps_of(&log), ["hot", "hot", "hot", "hot"]);
    assert_eq!(backlog.dropped().superseded, 0);
}

#[test]
fn a_newer_work_of_a_key_replaces_the_queued_one_in_its_place() {
    let log = Log::default();
    let mut backlog = Backlog::new(roomy());
    for version in 0..1000 {
        backlog.push(probe(&log, "a", "hot", 1 + version % 3, (100, 100)));
    }
    backlog.push(probe(&log, "a", "cold", 1, (100, 100)));
    assert_eq!(backlog.len(), 2, "one work per key");
    assert_eq!(backlog.bytes(), (200, 0));
    assert_eq!(backlog.dropped().superseded, 999);
    drain(&mut backlog);
    assert_eq!(
        steps_of(&log),
        ["hot", "cold"],
        "the last version: one step"
    );
}

#[test]
fn past_its_bound_a_namespace_sheds_its_newest_waiting_work_and_asks_for_it_at_its_turn() {
    let log = Log::default();
    let bounds = Bounds {
        namespace_bytes: 250,
        queued_bytes: usize::MAX,
        started_bytes: usize::MAX,
        returns: usize::MAX,
    };
    let mut backlog = Backlog::new(bounds);
    for name in ["a-1", "a-2", "a-3", "a-4"] {
        backlog.push(probe(&log, "a", name, 1, (100, 1000)));
    }
    backlog.push(probe(&log, "b", "b-1", 1, (100, 1000)));
    assert_eq!(backlog.dropped().shed, 2, "a-3 and a-4");
    assert_eq!(backlog.bytes(), (300, 0));
    drain(&mut backlog);
    let log = log.lock().unwrap().clone();
    let expected = [
        Seen::Step("a-1".into()),
        Seen::Done("a-1".into()),
        Seen::Step("b-1".into()),
        Seen::Done("b-1".into()),
        Seen::Step("a-2".into()),
        Seen::Done("a-2".into()),
        Seen::Again("a-3".into()),
        Seen::Again("a-4".into()),
    ];
    assert_eq!(log, expected);
}

#[test]
fn past_the_total_the_heaviest_namespace_pays_and_work_under_way_is_never_shed() {
    let log = Log::default();
    let bounds = Bounds {
        namespace_bytes: usize::MAX,
        queued_bytes: 500,
        started_bytes: usize::MAX,
        returns: usize::MAX,
    };
    let mut backlog = Backlog::new(bounds);
    backlog.push(probe(&log, "heavy", "h-1", 3, (300, 300)));
    // Under way: h-1 holds its bytes as work started, not as waiting work.
    backlog
        .step(|_| true, &mut crate::support::sandbox())
        .unwrap();
    backlog.push(probe(&log, "light", "l-1", 1, (100, 100)));
    for name in ["h-2", "h-3"] {
        backlog.push(probe(&log, "heavy", name, 1, (200, 200)));
    }
    backlog.push(probe(&log, "light", "l-2", 1, (100, 100)));
    assert_eq!(backlog.dropped().shed, 1, "h-3, the heaviest lane's last");
    assert_eq!(backlog.bytes(), (400, 300));
    drain(&mut backlog);
    let log = log.lock().unwrap();
    assert!(log.contains(&Seen::Done("h-1".into())));
    assert!(log.contains(&Seen::Again("h-3".into())));
    assert!(log.contains(&Seen::Done("l-2".into())));
}

#[test]
fn no_work_starts_while_what_is_under_way_holds_the_bound_and_what_started_finishes() {
    let log = Log::default();
    let bounds = Bounds {
        namespace_bytes: usize::MAX,
        queued_bytes: usize::MAX,
        started_bytes: 1000,
        returns: usize::MAX,
    };
    let mut backlog = Backlog::new(bounds);
    for namespace in ["a", "b", "c"] {
        backlog.push(probe(&log, namespace, namespace, 3, (10, 1000)));
    }
    drain(&mut backlog);
    assert_eq!(
        steps_of(&log),
        ["a", "a", "a", "b", "b", "b", "c", "c", "c"],
        "one under way at a time: the bound is one work's"
    );
}

#[test]
fn work_heavier_than_its_lane_comes_back_once_and_goes_and_few_come_back_at_once() {
    let log = Log::default();
    let bounds = Bounds {
        namespace_bytes: 100,
        queued_bytes: usize::MAX,
        started_bytes: usize::MAX,
        returns: 1,
    };
    let mut backlog = Backlog::new(bounds);
    backlog.push(probe(&log, "a", "a-big", 2, (500, 500)));
    backlog.push(probe(&log, "b", "b-big", 2, (500, 500)));
    assert_eq!(
        backlog.dropped().shed,
        2,
        "each alone past its lane's bound"
    );
    backlog
        .step(|_| true, &mut crate::support::sandbox())
        .unwrap()
        .done
        .unwrap()
        .finish();
    assert_eq!(backlog.outstanding(), 1);
    assert!(
        backlog
            .step(|_| true, &mut crate::support::sandbox())
            .is_none(),
        "b's token waits: one work may be asked back at a time"
    );
    let back = Probe {
        namespace: "a".into(),
        name: "a-big".into(),
        steps: 2,
        taken: 0,
        waiting: 500,
        working: 500,
        log: log.clone(),
        ended: false,
        returning: true,
    };
    backlog.push(Box::new(back));
    assert_eq!(
        backlog.dropped().shed,
        2,
        "work coming back is never shed again"
    );
    drain(&mut backlog);
    let log = log.lock().unwrap().clone();
    let ends: Vec<&Seen> = log
        .iter()
        .filter(|seen| !matches!(seen, Seen::Step(_)))
        .collect();
    assert_eq!(
        ends,
        [
            &Seen::Again("a-big".into()),
            // a-big's first step started it: b's token may ask for b-big.
            &Seen::Again("b-big".into()),
            &Seen::Done("a-big".into()),
        ]
    );
}

/// A work whose one step waits without running, as a step of the lowest-priority thread does
/// on a loaded machine; it says when it is done.
struct Waiting {
    namespace: Arc<str>,
    name: String,
    done: std::sync::mpsc::Sender<String>,
}

impl Work for Waiting {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(self.name.as_str().into())
    }

    fn step(&mut self, _: &mut kube_retention_evaluator::Sandbox) -> Progress {
        std::thread::sleep(std::time::Duration::from_millis(200));
        Progress::Done
    }

    fn weight(&self) -> usize {
        1
    }

    fn finish(self: Box<Self>) {
        self.done.send(self.name.clone()).unwrap();
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        self
    }
}

#[test]
fn a_namespace_is_charged_the_cpu_time_its_steps_took_not_the_time_they_were_away() {
    use kube_retention_evaluator::{EvaluatorMetrics, Submission, serve};
    use kube_retention_runtime::time_shares::TimeShares;
    let (works, queued) = std::sync::mpsc::channel::<Submission>();
    let (done, finished) = std::sync::mpsc::channel();
    for name in ["first", "second"] {
        let waiting = Waiting {
            namespace: "a".into(),
            name: name.into(),
            done: done.clone(),
        };
        let waiting: Box<dyn Work> = Box::new(waiting);
        works.send(waiting.into()).unwrap();
    }
    drop(works);
    let evaluator = std::thread::spawn(move || {
        // A thousandth of a core and no credit ahead: charged the 200 ms the first step was
        // away, the namespace would wait 200 s before its second.
        let shares = TimeShares::new(0.001, std::time::Duration::ZERO);
        serve(
            &queued,
            shares,
            roomy(),
            crate::support::sandbox(),
            &EvaluatorMetrics::default(),
        );
    });
    let patience = std::time::Duration::from_secs(60);
    assert_eq!(finished.recv_timeout(patience).unwrap(), "first");
    assert_eq!(
        finished.recv_timeout(patience).unwrap(),
        "second",
        "the second waited as if the first had run for its whole 200 ms"
    );
    evaluator.join().unwrap();
}
