//! The evaluator's backlog under generated floods of pushes, steps and answers to what it asked
//! back: every work ends exactly once (done, shed and asked for again, or superseded), the
//! bounds are never passed by more than one work, and a namespace with work gets a step every
//! round.

use crate::backlog_support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use backlog_support::{Log, Probe, Seen};
use kube_retention_evaluator::{Backlog, Bounds};
use proptest::prelude::*;

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
                    let turn = backlog.step(
                        |namespace| {
                            let index: u8 = namespace.parse().unwrap();
                            held & (1 << index) == 0
                        },
                        &mut crate::support::sandbox(),
                    );
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
            while let Some(turn) = backlog.step(|_| true, &mut crate::support::sandbox()) {
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
