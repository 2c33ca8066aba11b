//! The evaluator's backlog with probe work (no CEL): a step per turn and namespaces in turn, one
//! work per key, the memory bounds kept by shedding the heaviest tenant's waiting work and never
//! work under way — and, over generated floods of pushes and steps, that these hold together:
//! every work ends exactly once (done, shed and asked for again, or superseded), the bounds are
//! never passed by more than one work, and a namespace with work gets a step every round.

#![allow(clippy::unwrap_used)] // test code

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube_retention_controller::evaluator::{Backlog, Bounds, Progress, Work, WorkKey, YIELD_EVERY};
use proptest::prelude::*;

/// What happened to the probes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Step(String),
    Done(String),
    /// A shed probe's token asked for it again.
    Again(String),
    /// A probe or token dropped unfinished: superseded.
    Dropped(String),
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A work of `steps` steps, holding `waiting` bytes before it starts and `working` after.
struct Probe {
    namespace: Arc<str>,
    name: String,
    steps: usize,
    taken: usize,
    waiting: usize,
    working: usize,
    log: Log,
    /// Finished, or shed into a token.
    ended: bool,
    /// Shed before and asked for again.
    returning: bool,
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.ended {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Dropped(self.name.clone()));
        }
    }
}

fn probe(
    log: &Log,
    namespace: &str,
    name: &str,
    steps: usize,
    bytes: (usize, usize),
) -> Box<dyn Work> {
    Box::new(Probe {
        namespace: namespace.into(),
        name: name.into(),
        steps,
        taken: 0,
        waiting: bytes.0,
        working: bytes.1,
        log: log.clone(),
        ended: false,
        returning: false,
    })
}

impl Work for Probe {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(self.name.as_str().into())
    }

    fn step(&mut self) -> Progress {
        self.taken += 1;
        self.log.lock().unwrap().push(Seen::Step(self.name.clone()));
        if self.taken >= self.steps {
            Progress::Done
        } else {
            Progress::More
        }
    }

    fn weight(&self) -> usize {
        if self.taken == 0 {
            self.waiting
        } else {
            self.working
        }
    }

    fn returning(&self) -> bool {
        self.returning
    }

    fn finish(mut self: Box<Self>) {
        self.ended = true;
        self.log.lock().unwrap().push(Seen::Done(self.name.clone()));
    }

    fn shed(mut self: Box<Self>) -> Box<dyn Work> {
        self.ended = true;
        Box::new(Token {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            log: self.log.clone(),
            ended: false,
        })
    }
}

/// A shed probe.
struct Token {
    namespace: Arc<str>,
    name: String,
    log: Log,
    ended: bool,
}

impl Drop for Token {
    fn drop(&mut self) {
        if !self.ended {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Dropped(self.name.clone()));
        }
    }
}

impl Work for Token {
    fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    fn key(&self) -> WorkKey {
        WorkKey::Cleaner(self.name.as_str().into())
    }

    fn step(&mut self) -> Progress {
        Progress::Done
    }

    fn weight(&self) -> usize {
        0
    }

    fn finish(mut self: Box<Self>) {
        self.ended = true;
        self.log
            .lock()
            .unwrap()
            .push(Seen::Again(self.name.clone()));
    }

    fn shed(self: Box<Self>) -> Box<dyn Work> {
        self
    }
}

/// Steps the backlog, every namespace ready, until it is empty; finishes what is done.
fn drain(backlog: &mut Backlog) {
    while let Some(turn) = backlog.step(|_| true) {
        if let Some(done) = turn.done {
            done.finish();
        }
    }
    assert!(backlog.is_empty());
}

fn roomy() -> Bounds {
    Bounds {
        namespace_bytes: usize::MAX,
        queued_bytes: usize::MAX,
        started_bytes: usize::MAX,
        returns: usize::MAX,
    }
}

fn steps_of(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|seen| match seen {
            Seen::Step(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

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
    backlog.step(|_| true).unwrap();
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
    backlog.step(|_| true).unwrap();
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
    backlog.step(|_| true).unwrap().done.unwrap().finish();
    assert_eq!(backlog.outstanding(), 1);
    assert!(
        backlog.step(|_| true).is_none(),
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

/// What a generated flood does.
#[derive(Debug, Clone)]
enum Act {
    Push {
        namespace: u8,
        key: u8,
        steps: u8,
        waiting: u16,
        working: u16,
    },
    Step {
        /// Namespaces held back by their share this turn.
        held: u8,
    },
    /// The submitter answers the oldest work asked for again: back, or gone.
    Return { back: bool },
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (0u8..4, 0u8..6, 1u8..6, 1u16..400, 1u16..1200).prop_map(
            |(namespace, key, steps, waiting, working)| Act::Push {
                namespace,
                key,
                steps,
                waiting,
                working,
            }
        ),
        (0u8..16).prop_map(|held| Act::Step { held }),
        any::<bool>().prop_map(|back| Act::Return { back }),
    ]
}

/// Answers the oldest work asked for again (a token's name in `log` not answered yet): pushed
/// back as work coming back, or said to be gone. Answers whether there was one.
fn answer_one(backlog: &mut Backlog, log: &Log, answered: &mut usize, back: bool) -> bool {
    let asked: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|seen| match seen {
            Seen::Again(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    let Some(name) = asked.get(*answered) else {
        return false;
    };
    *answered += 1;
    if !back {
        backlog.nothing_returned();
        return true;
    }
    let (namespace, _) = name.split_once('-').unwrap();
    backlog.push(Box::new(Probe {
        namespace: namespace.into(),
        name: name.clone(),
        steps: 2,
        taken: 0,
        waiting: 400,
        working: 400,
        log: log.clone(),
        ended: false,
        returning: true,
    }));
    true
}

proptest! {
    #[test]
    fn under_any_flood_the_bounds_hold_and_every_work_ends_once(acts in prop::collection::vec(act(), 1..300)) {
        const MOST: usize = 1200;
        const MOST_WAITING: usize = 400;
        let bounds = Bounds { namespace_bytes: 600, queued_bytes: 1500, started_bytes: 2000, returns: 2 };
        let log = Log::default();
        let mut backlog = Backlog::new(bounds);
        let mut pushed = 0u64;
        let mut ended = 0u64;
        let mut answered = 0;
        let mut waited: HashMap<Arc<str>, HashSet<Arc<str>>> = HashMap::new();
        for act in acts {
            match act {
                Act::Push { namespace, key, steps, waiting, working } => {
                    let work = Probe {
                        namespace: namespace.to_string().into(),
                        name: format!("{namespace}-{key}"),
                        steps: steps.into(),
                        taken: 0,
                        waiting: waiting.into(),
                        working: working.into(),
                        log: log.clone(),
                        ended: false,
                        returning: false,
                    };
                    backlog.push(Box::new(work));
                    pushed += 1;
                }
                Act::Return { back } => {
                    if answer_one(&mut backlog, &log, &mut answered, back) && back {
                        pushed += 1;
                    }
                }
                Act::Step { held } => {
                    let namespaces: Vec<Arc<str>> = backlog.namespaces().cloned().collect();
                    // Without room to start work, or to ask for more back, not every
                    // namespace may go: no round is owed.
                    let room = backlog.bytes().1 < bounds.started_bytes
                        && backlog.outstanding() < bounds.returns;
                    let turn = backlog.step(|namespace| {
                        let index: u8 = namespace.parse().unwrap();
                        held & (1 << index) == 0
                    });
                    // A namespace with work that was let go waits at most a round: no other
                    // goes twice before it.
                    let served = turn.as_ref().map(|turn| turn.namespace.clone());
                    for namespace in &namespaces {
                        let index: u8 = namespace.parse().unwrap();
                        let others = waited.entry(namespace.clone()).or_default();
                        if !room || held & (1 << index) != 0 || served.as_ref() == Some(namespace) {
                            others.clear();
                        } else if let Some(served) = &served {
                            prop_assert!(others.insert(served.clone()), "{served} went twice while {namespace} waited");
                        }
                    }
                    if let Some(done) = turn.and_then(|turn| turn.done) {
                        done.finish();
                        ended += 1;
                    }
                }
            }
            let (queued, started) = backlog.bytes();
            let coming_back = bounds.returns * MOST_WAITING;
            prop_assert!(backlog.outstanding() <= bounds.returns);
            prop_assert!(queued <= bounds.queued_bytes + coming_back, "{queued} waiting");
            prop_assert!(started <= bounds.started_bytes + MOST, "{started} under way");
        }
        // The submitters answer everything asked, and the backlog drains.
        loop {
            while let Some(turn) = backlog.step(|_| true) {
                if let Some(done) = turn.done {
                    done.finish();
                    ended += 1;
                }
            }
            if !answer_one(&mut backlog, &log, &mut answered, true) {
                break;
            }
            pushed += 1;
        }
        prop_assert!(
            backlog.is_empty(),
            "left: {} works, {:?} bytes, {} outstanding, {answered} answered",
            backlog.len(),
            backlog.bytes(),
            backlog.outstanding()
        );
        let dropped = backlog.dropped();
        prop_assert_eq!(ended + dropped.superseded, pushed);
        let log = log.lock().unwrap();
        let count = |what: fn(&Seen) -> bool| log.iter().filter(|seen| what(seen)).count() as u64;
        let done = count(|seen| matches!(seen, Seen::Done(_)));
        let again = count(|seen| matches!(seen, Seen::Again(_)));
        let superseded = count(|seen| matches!(seen, Seen::Dropped(_)));
        // Every work pushed ended exactly once: done, asked for again, or superseded.
        prop_assert_eq!(done + again + superseded, pushed);
        prop_assert_eq!(done + again, ended);
        prop_assert_eq!(superseded, dropped.superseded);
        prop_assert!(again <= dropped.shed, "{again} asked again, {} shed", dropped.shed);
        prop_assert_eq!(backlog.outstanding(), 0);
    }
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

    fn step(&mut self) -> Progress {
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
    use kube_retention_controller::evaluator::{EvaluatorMetrics, Submission, serve};
    use kube_retention_controller::time_shares::TimeShares;
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
        serve(&queued, shares, roomy(), &EvaluatorMetrics::default());
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
