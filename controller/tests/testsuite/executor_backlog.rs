//! The executor's backlog: namespaces take turns whatever their work's priority, a namespace's
//! own work goes most urgent first, stale stamps are passed over and the bound on informational
//! work costs the namespace that floods.

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

/// The next `count` items taken, at most, named.
fn next_named(backlog: &mut Backlog, count: usize) -> Vec<String> {
    std::iter::from_fn(|| backlog.next(now()))
        .take(count)
        .map(|work| named(&work))
        .collect()
}

fn drain(backlog: &mut Backlog) -> Vec<String> {
    next_named(backlog, usize::MAX)
}

#[test]
fn one_namespaces_flood_does_not_starve_another() {
    let mut backlog = Backlog::default();
    for n in 0..100_000 {
        assert!(backlog.push(delete("a", &n.to_string())).is_none());
    }
    backlog.push(delete("b", "due"));
    let first = next_named(&mut backlog, 2);
    assert_eq!(
        first,
        ["a/0", "b/due"],
        "b's deletion goes out within a round"
    );
    assert_eq!(backlog.next(now()).map(|work| named(&work)).unwrap(), "a/1");
    assert_eq!(backlog.len(), 99_998);
    assert_eq!(backlog.namespaces(), 1, "b left the rotation");
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
    assert_eq!(backlog.namespaces(), 0);
}

#[test]
fn priority_orders_a_namespaces_own_work_and_the_namespaces_take_turns() {
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
            "c/labelled",
            "b/stamped",
            "a/0",
            "c/told",
            "b/warned",
            "a/1",
            "a/2"
        ],
        "in each turn the namespace's most urgent work: a label before an Event, a stamp \
         before a Warning"
    );
}

#[test]
fn another_namespaces_notice_goes_within_a_round_of_a_flood_of_deletions() {
    let mut backlog = Backlog::default();
    for n in 0..100_000 {
        backlog.push(delete("a", &n.to_string()));
    }
    let later = now() + SignedDuration::from_hours(1);
    backlog.push(warn("b", "expiring"));
    backlog.push(stamp("c", "stamped", later));
    backlog.push(event("d", "deleted"));
    let first = next_named(&mut backlog, 5);
    assert_eq!(
        first,
        ["a/0", "b/expiring", "c/stamped", "d/deleted", "a/1"],
        "a's deletions are a's own backlog: the others' Warning, stamp and Event each wait \
         one round, not 100,000 deletions"
    );
    assert_eq!(backlog.namespaces(), 1);
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
    /// Work of this priority (0 deletion, 1 stamp, 2 Event) in this namespace.
    Push(u8, u8),
    Next,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..4, 0u8..3).prop_map(|(namespace, priority)| Op::Push(namespace, priority)),
        2 => Just(Op::Next),
    ]
}

/// One item taken: its namespace, its index among all pushed, its priority, the most urgent
/// priority its namespace had waiting just before, and the namespaces with work left just after.
struct Taken {
    namespace: u8,
    index: usize,
    priority: usize,
    most_urgent: usize,
    backlogged: Vec<u8>,
}

/// What waits, by namespace and priority.
type Waiting = HashMap<u8, [usize; 3]>;

fn take(backlog: &mut Backlog, waiting: &mut Waiting) -> Option<Taken> {
    let work = backlog.next(now())?;
    let name = named(&work);
    let (namespace, index) = name.split_once('/').unwrap();
    let namespace: u8 = namespace.parse().unwrap();
    let mine = waiting.get_mut(&namespace).unwrap();
    let most_urgent = mine.iter().position(|n| *n > 0).unwrap();
    mine[work.priority()] -= 1;
    let mut backlogged: Vec<u8> = waiting
        .iter()
        .filter(|(_, n)| n.iter().sum::<usize>() > 0)
        .map(|(namespace, _)| *namespace)
        .collect();
    backlogged.sort_unstable();
    Some(Taken {
        namespace,
        index: index.parse().unwrap(),
        priority: work.priority(),
        most_urgent,
        backlogged,
    })
}

proptest! {
    /// Work of every priority pushed and taken in any interleaving: each comes out once, in its
    /// namespace's order within its priority, always of the most urgent priority its namespace
    /// has waiting; and between two of a namespace that still has a backlog, every other
    /// namespace with a backlog at the first gets exactly one turn, and no other, whatever the
    /// priority of its work or theirs.
    #[test]
    fn namespaces_with_a_backlog_take_one_turn_each_their_most_urgent_first(
        ops in prop::collection::vec(op(), 0..300)
    ) {
        let mut backlog = Backlog::default();
        let later = now() + SignedDuration::from_hours(1);
        let mut pushed = 0usize;
        let mut waiting = Waiting::new();
        let mut taken: Vec<Taken> = Vec::new();
        for op in ops {
            match op {
                Op::Push(namespace, priority) => {
                    let (namespace_name, name) = (namespace.to_string(), pushed.to_string());
                    let work = match priority {
                        0 => delete(&namespace_name, &name),
                        1 => stamp(&namespace_name, &name, later),
                        _ => event(&namespace_name, &name),
                    };
                    prop_assert!(backlog.push(work).is_none());
                    waiting.entry(namespace).or_default()[usize::from(priority)] += 1;
                    pushed += 1;
                }
                Op::Next => taken.extend(take(&mut backlog, &mut waiting)),
            }
        }
        while let Some(one) = take(&mut backlog, &mut waiting) {
            taken.push(one);
        }
        prop_assert!(backlog.is_empty());

        let mut indices: Vec<usize> = taken.iter().map(|one| one.index).collect();
        indices.sort_unstable();
        prop_assert_eq!(indices, (0..pushed).collect::<Vec<_>>(), "each exactly once");
        for one in &taken {
            prop_assert_eq!(one.priority, one.most_urgent, "{}'s most urgent first", one.namespace);
        }
        for namespace in 0u8..4 {
            for priority in 0..3 {
                let mine: Vec<usize> = taken
                    .iter()
                    .filter(|one| one.namespace == namespace && one.priority == priority)
                    .map(|one| one.index)
                    .collect();
                prop_assert!(
                    mine.windows(2).all(|pair| pair[0] < pair[1]),
                    "FIFO in {} at priority {}", namespace, priority
                );
            }
        }
        for (position, one) in taken.iter().enumerate() {
            if !one.backlogged.contains(&one.namespace) {
                continue;
            }
            let rest = &taken[position + 1..];
            let next = rest.iter().position(|other| other.namespace == one.namespace).unwrap();
            let mut between: Vec<u8> = rest[..next].iter().map(|other| other.namespace).collect();
            between.sort_unstable();
            let others: Vec<u8> =
                one.backlogged.iter().copied().filter(|other| *other != one.namespace).collect();
            prop_assert_eq!(between, others);
        }
    }
}
