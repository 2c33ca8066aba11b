//! The executor's backlog: namespaces take turns within a priority, priorities still come first,
//! stale stamps are passed over and the bound on informational work costs the namespace that
//! floods.

use crate::work_support;

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use kube_retention_controller::executor::queue::{Backlog, MAX_QUEUED_EVENTS, Work};
use proptest::prelude::*;
use work_support::{deletion, event, jobs, labelling, named, stamping, warning};

fn delete(namespace: &str, name: &str) -> Work {
    Work::Action(deletion(namespace, name), jobs())
}

fn stamp(namespace: &str, name: &str, at: Timestamp) -> Work {
    Work::Action(stamping(namespace, name, at), jobs())
}

fn label(namespace: &str, name: &str) -> Work {
    Work::Action(labelling(namespace, name), jobs())
}

fn warn(namespace: &str, name: &str) -> Work {
    Work::Action(warning(namespace, name), jobs())
}

fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

fn drain(backlog: &mut Backlog) -> Vec<String> {
    std::iter::from_fn(|| backlog.next(now()))
        .map(|work| named(&work))
        .collect()
}

#[test]
fn one_namespaces_flood_does_not_starve_another() {
    let mut backlog = Backlog::default();
    for n in 0..100_000 {
        assert!(backlog.push(delete("a", &n.to_string())).is_none());
    }
    backlog.push(delete("b", "due"));
    let first: Vec<String> = (0..2)
        .filter_map(|_| backlog.next(now()))
        .map(|work| named(&work))
        .collect();
    assert_eq!(
        first,
        ["a/0", "b/due"],
        "b's deletion goes out within a round"
    );
    assert_eq!(backlog.next(now()).map(|work| named(&work)).unwrap(), "a/1");
    assert_eq!(backlog.len(), 99_998);
    assert_eq!(backlog.namespaces(0), 1, "b left the rotation");
}

#[test]
fn namespaces_take_turns_and_a_newcomer_joins_at_the_back() {
    let mut backlog = Backlog::default();
    for (namespace, name) in [("a", "0"), ("a", "1"), ("a", "2"), ("b", "0"), ("b", "1")] {
        backlog.push(delete(namespace, name));
    }
    backlog.push(delete("c", "0"));
    assert_eq!(named(&backlog.next(now()).unwrap()), "a/0");
    backlog.push(delete("d", "0"));
    assert_eq!(
        drain(&mut backlog),
        ["b/0", "c/0", "a/1", "d/0", "b/1", "a/2"]
    );
    assert!(backlog.is_empty());
    assert_eq!(backlog.namespaces(0), 0);
}

#[test]
fn priority_wins_over_fairness() {
    let mut backlog = Backlog::default();
    let later = now() + SignedDuration::from_hours(1);
    backlog.push(event("c", "told"));
    backlog.push(stamp("b", "stamped", later));
    backlog.push(warn("b", "warned"));
    for name in ["0", "1", "2"] {
        backlog.push(delete("a", name));
    }
    backlog.push(label("c", "labelled"));
    assert_eq!(
        drain(&mut backlog),
        [
            "a/0",
            "a/1",
            "a/2",
            "b/stamped",
            "c/labelled",
            "c/told",
            "b/warned"
        ],
        "every deletion before any stamp or label, and those before any Event"
    );
}

#[test]
fn stamps_whose_time_passed_are_passed_over_without_using_a_turn() {
    let mut backlog = Backlog::default();
    let past = now() - SignedDuration::from_secs(1);
    let later = now() + SignedDuration::from_hours(1);
    backlog.push(stamp("a", "stale", past));
    backlog.push(stamp("a", "fresh", later));
    backlog.push(stamp("b", "fresh", later));
    backlog.push(stamp("c", "stale", now()));
    backlog.push(event("c", "told"));
    assert_eq!(drain(&mut backlog), ["a/fresh", "b/fresh", "c/told"]);
    assert!(backlog.is_empty());
}

#[test]
fn the_bound_drops_the_oldest_informational_work() {
    let mut backlog = Backlog::default();
    backlog.push(warn("a", "first"));
    for n in 1..MAX_QUEUED_EVENTS {
        assert!(backlog.push(event("a", &n.to_string())).is_none());
    }
    let dropped = backlog.push(event("a", "last")).unwrap();
    assert_eq!(
        named(&dropped),
        "a/first",
        "the oldest, a Warning counts too"
    );
    assert_eq!(backlog.len(), MAX_QUEUED_EVENTS);
    assert_eq!(named(&backlog.next(now()).unwrap()), "a/1");
}

#[test]
fn the_bound_costs_the_namespace_that_floods() {
    let mut backlog = Backlog::default();
    backlog.push(event("quiet", "oldest"));
    let dropped: Vec<String> = (0..MAX_QUEUED_EVENTS + 2)
        .filter_map(|n| backlog.push(event("loud", &n.to_string())))
        .map(|work| named(&work))
        .collect();
    assert_eq!(dropped, ["loud/0", "loud/1", "loud/2"]);
    assert_eq!(named(&backlog.next(now()).unwrap()), "quiet/oldest");
}

#[test]
fn deletions_stamps_and_labels_are_never_dropped() {
    let mut backlog = Backlog::default();
    for n in 0..MAX_QUEUED_EVENTS + 10 {
        assert!(backlog.push(delete("a", &n.to_string())).is_none());
        assert!(backlog.push(label("a", &n.to_string())).is_none());
    }
    assert_eq!(backlog.len(), 2 * (MAX_QUEUED_EVENTS + 10));
}

#[derive(Debug, Clone)]
enum Op {
    Push(u8),
    Next,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => (0u8..4).prop_map(Op::Push), 2 => Just(Op::Next)]
}

proptest! {
    /// Deletions pushed and taken in any interleaving: each comes out once, in its namespace's
    /// order, and between two of a namespace that still has a backlog, every other namespace
    /// with a backlog at the first gets exactly one turn, and no other.
    #[test]
    fn namespaces_with_a_backlog_take_one_turn_each(ops in prop::collection::vec(op(), 0..300)) {
        let mut backlog = Backlog::default();
        let mut pushed = 0usize;
        let mut waiting: HashMap<u8, usize> = HashMap::new();
        // Each item taken, and which namespaces had a backlog right after.
        let mut taken: Vec<(u8, usize, Vec<u8>)> = Vec::new();
        let mut take = |backlog: &mut Backlog, waiting: &mut HashMap<u8, usize>| {
            let work = backlog.next(now())?;
            let name = named(&work);
            let (namespace, index) = name.split_once('/').unwrap();
            let namespace: u8 = namespace.parse().unwrap();
            *waiting.get_mut(&namespace).unwrap() -= 1;
            let mut backlogged: Vec<u8> =
                waiting.iter().filter(|(_, n)| **n > 0).map(|(ns, _)| *ns).collect();
            backlogged.sort_unstable();
            taken.push((namespace, index.parse().unwrap(), backlogged));
            Some(())
        };
        for op in ops {
            match op {
                Op::Push(namespace) => {
                    backlog.push(delete(&namespace.to_string(), &pushed.to_string()));
                    *waiting.entry(namespace).or_default() += 1;
                    pushed += 1;
                }
                Op::Next => {
                    take(&mut backlog, &mut waiting);
                }
            }
        }
        while take(&mut backlog, &mut waiting).is_some() {}
        prop_assert!(backlog.is_empty());

        let mut indices: Vec<usize> = taken.iter().map(|(_, index, _)| *index).collect();
        indices.sort_unstable();
        prop_assert_eq!(indices, (0..pushed).collect::<Vec<_>>(), "each exactly once");
        for namespace in 0u8..4 {
            let mine: Vec<usize> = taken.iter().filter(|t| t.0 == namespace).map(|t| t.1).collect();
            prop_assert!(mine.windows(2).all(|pair| pair[0] < pair[1]), "FIFO in {}", namespace);
        }
        for (position, (namespace, _, backlogged)) in taken.iter().enumerate() {
            if !backlogged.contains(namespace) {
                continue;
            }
            let rest = &taken[position + 1..];
            let next = rest.iter().position(|t| t.0 == *namespace).unwrap();
            let mut between: Vec<u8> = rest[..next].iter().map(|t| t.0).collect();
            between.sort_unstable();
            let others: Vec<u8> =
                backlogged.iter().copied().filter(|other| other != namespace).collect();
            prop_assert_eq!(between, others);
        }
    }

    /// Work of every priority pushed and taken in any interleaving: what comes out is always of
    /// the most urgent priority waiting.
    #[test]
    fn the_most_urgent_priority_goes_first(ops in prop::collection::vec((0u8..3, 0u8..3, any::<bool>()), 0..300)) {
        let mut backlog = Backlog::default();
        let mut waiting = [0usize; 3];
        let later = now() + SignedDuration::from_hours(1);
        for (n, (namespace, priority, take)) in ops.into_iter().enumerate() {
            if take {
                let Some(work) = backlog.next(now()) else {
                    prop_assert_eq!(waiting, [0; 3]);
                    continue;
                };
                let urgent = waiting.iter().position(|n| *n > 0).unwrap();
                prop_assert_eq!(work.priority(), urgent);
                waiting[urgent] -= 1;
            } else {
                let (namespace, name) = (namespace.to_string(), n.to_string());
                let work = match priority {
                    0 => delete(&namespace, &name),
                    1 => stamp(&namespace, &name, later),
                    _ => event(&namespace, &name),
                };
                prop_assert!(backlog.push(work).is_none());
                waiting[usize::from(priority)] += 1;
            }
        }
        prop_assert_eq!(backlog.len(), waiting.iter().sum::<usize>());
    }
}
