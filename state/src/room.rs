//! The bound on the runs the state keeps a record of (`--max-tracked-objects`), shared by every
//! namespace. A record takes some 270 bytes with its indexes, and anyone who may create objects
//! of a watched kind adds one each: unbounded, a tenant's flood of objects would take the
//! controller's memory, and with it every namespace's deletions.
//!
//! While there is room every run is kept. At the bound, the namespace holding the most records
//! is the one that goes without: a run of a namespace holding fewer takes the place of one of
//! the heaviest's, and a new run of the heaviest (or of one as heavy) is left out. No namespace
//! can keep another's runs out by filling the room; the one that fills it finds its newest runs
//! untracked, so not deleted, which hurts it alone.
//!
//! A run left out, or let go of for another's, is tracked again when it changes while there is
//! room, and its kind is listed again in its namespace once a tenth of the room is free
//! ([`Room::left_out_to_list`]): a tenth, so that a namespace at the bound is listed again once per
//! so many of its deletions, not at each. Leaving out some runs of a group never deletes more
//! than the group's limits would: those kept are a subset, and a run with more newer ones than
//! the limit among a subset has them among all.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube_retention_common::kinds::KindId;

/// The default bound on records: some 52 MiB of them ([`RECORD_BYTES`] each), within the
/// controller's share of the chart's memory limit beside its other bounds.
pub const DEFAULT_MAX_TRACKED: usize = 200_000;

/// What a record holds with its indexes: 272 bytes a Job, measured at a million of them
/// (docs/benchmarks/envelope.md).
pub const RECORD_BYTES: usize = 272;

/// What a new run may have of the room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Admit {
    /// There is room: keep it.
    Keep,
    /// At the bound: keep it in place of a run of this namespace, the heaviest.
    InPlaceOf(Arc<str>),
    /// At the bound, and its namespace is the heaviest (or as heavy, but for this one): leave
    /// it out.
    LeaveOut,
}

/// The records kept, counted by namespace, against their bound.
#[derive(Debug)]
pub(super) struct Room {
    max: usize,
    total: usize,
    by_namespace: HashMap<Arc<str>, usize>,
    /// The namespaces by how many records each holds: the heaviest last.
    by_count: BTreeSet<(usize, Arc<str>)>,
    /// The kinds, in namespaces, of runs left out or let go of: listed again once there is room.
    left_out: BTreeSet<(KindId, Arc<str>)>,
    /// Runs left out or let go of since the start.
    left_out_total: u64,
}

impl Default for Room {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TRACKED)
    }
}

impl Room {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            total: 0,
            by_namespace: HashMap::new(),
            by_count: BTreeSet::new(),
            left_out: BTreeSet::new(),
            left_out_total: 0,
        }
    }

    /// What a new run of `namespace` may have of the room.
    pub(super) fn admit(&self, namespace: &str) -> Admit {
        if self.total < self.max {
            return Admit::Keep;
        }
        let Some((heaviest_count, heaviest)) = self.by_count.last() else {
            // A bound of none: nothing is kept.
            return Admit::LeaveOut;
        };
        let count = self.by_namespace.get(namespace).copied().unwrap_or(0);
        // Taking one of the heaviest's for this namespace leaves it no heavier than the
        // heaviest was less one: fairer. Otherwise it changes nothing but which is left out.
        if count + 1 < *heaviest_count {
            Admit::InPlaceOf(heaviest.clone())
        } else {
            Admit::LeaveOut
        }
    }

    /// A record of `namespace` was kept.
    pub(super) fn kept(&mut self, namespace: &Arc<str>) {
        let count = self.by_namespace.entry(namespace.clone()).or_insert(0);
        if *count > 0 {
            self.by_count.remove(&(*count, namespace.clone()));
        }
        *count += 1;
        self.by_count.insert((*count, namespace.clone()));
        self.total += 1;
    }

    /// A record of `namespace` was let go of (its run gone, or left out for room).
    pub(super) fn let_go(&mut self, namespace: &Arc<str>) {
        let Some(count) = self.by_namespace.get_mut(namespace) else {
            return;
        };
        self.by_count.remove(&(*count, namespace.clone()));
        *count -= 1;
        if *count == 0 {
            self.by_namespace.remove(namespace);
        } else {
            self.by_count.insert((*count, namespace.clone()));
        }
        self.total -= 1;
    }

    /// A run of `kind` in `namespace` was left out, or let go of for another's.
    pub(super) fn left_out(&mut self, kind: KindId, namespace: Arc<str>) {
        self.left_out.insert((kind, namespace));
        self.left_out_total += 1;
    }

    /// The kinds, in namespaces, whose runs were left out, to list again now that a tenth of
    /// the room is free; none until then. Each is answered once.
    pub(super) fn left_out_to_list(&mut self) -> Vec<(KindId, Arc<str>)> {
        if self.left_out.is_empty() || self.max - self.total.min(self.max) < self.max.div_ceil(10) {
            return Vec::new();
        }
        std::mem::take(&mut self.left_out).into_iter().collect()
    }

    /// Records kept now.
    #[cfg(test)]
    pub(super) fn total(&self) -> usize {
        self.total
    }

    /// Runs left out or let go of since the start.
    pub(super) fn left_out_total(&self) -> u64 {
        self.left_out_total
    }

    /// The `count` namespaces holding the most records, the heaviest first.
    pub(super) fn heaviest_few(&self, count: usize) -> Vec<Arc<str>> {
        let heaviest = self.by_count.iter().rev().take(count);
        heaviest.map(|(_, namespace)| namespace.clone()).collect()
    }

    /// The namespace holding the most records, and how many.
    pub(super) fn heaviest(&self) -> Option<(Arc<str>, usize)> {
        let (count, namespace) = self.by_count.last()?;
        Some((namespace.clone(), *count))
    }

    /// Records `namespace` holds now.
    #[cfg(test)]
    pub(super) fn of(&self, namespace: &str) -> usize {
        self.by_namespace.get(namespace).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn under_the_bound_every_run_is_kept() {
        let mut room = Room::new(3);
        for _ in 0..2 {
            assert_eq!(room.admit("a"), Admit::Keep);
            room.kept(&ns("a"));
        }
        assert_eq!(room.admit("b"), Admit::Keep);
    }

    #[test]
    fn at_the_bound_the_heaviest_namespace_goes_without() {
        let mut room = Room::new(4);
        for _ in 0..3 {
            room.kept(&ns("a"));
        }
        room.kept(&ns("b"));
        assert_eq!(room.admit("a"), Admit::LeaveOut);
        assert_eq!(room.admit("b"), Admit::InPlaceOf(ns("a")));
        assert_eq!(room.admit("c"), Admit::InPlaceOf(ns("a")));
        // As heavy as the heaviest but for this one: taking its place changes nothing.
        room.let_go(&ns("a"));
        room.kept(&ns("b"));
        assert_eq!((room.of("a"), room.of("b")), (2, 2));
        assert_eq!(room.admit("b"), Admit::LeaveOut);
    }

    #[test]
    fn what_was_left_out_is_listed_again_once_a_tenth_of_the_room_is_free() {
        let kinds = kube_retention_common::kinds::Registry::builtin();
        let job = kinds.iter().next().map(|(id, _)| id).unwrap();
        let mut room = Room::new(20);
        for _ in 0..20 {
            room.kept(&ns("a"));
        }
        room.left_out(job, ns("a"));
        room.let_go(&ns("a"));
        assert!(
            room.left_out_to_list().is_empty(),
            "one place free of twenty"
        );
        room.let_go(&ns("a"));
        assert_eq!(room.left_out_to_list(), [(job, ns("a"))]);
        assert!(room.left_out_to_list().is_empty(), "answered once");
        assert_eq!(room.left_out_total(), 1);
    }

    proptest::proptest! {
        /// Whatever runs namespaces add and take away, the records kept never pass the bound,
        /// the counts stay exact, and a namespace holding fewer than the heaviest is never
        /// left out.
        #[test]
        fn the_bound_holds_and_only_the_heaviest_goes_without(
            max in 0usize..40,
            steps in proptest::collection::vec((0usize..5, proptest::bool::weighted(0.7)), 0..300),
        ) {
            let names: Vec<Arc<str>> = (0..5).map(|i| ns(&format!("ns-{i}"))).collect();
            let mut room = Room::new(max);
            let mut held = vec![0usize; names.len()];
            for (index, adding) in steps {
                let namespace = &names[index];
                if adding {
                    let heaviest = held.iter().copied().max().unwrap_or(0);
                    match room.admit(namespace) {
                        Admit::Keep => {}
                        Admit::InPlaceOf(other) => {
                            let other = names.iter().position(|name| *name == other).unwrap();
                            proptest::prop_assert_eq!(held[other], heaviest);
                            proptest::prop_assert!(held[index] + 1 < heaviest);
                            room.let_go(&names[other]);
                            held[other] -= 1;
                        }
                        Admit::LeaveOut => {
                            proptest::prop_assert!(
                                held[index] + 1 >= heaviest,
                                "{} records of {heaviest} left out", held[index]
                            );
                            continue;
                        }
                    }
                    room.kept(namespace);
                    held[index] += 1;
                } else if held[index] > 0 {
                    room.let_go(namespace);
                    held[index] -= 1;
                }
                proptest::prop_assert!(room.total() <= max);
                proptest::prop_assert_eq!(room.total(), held.iter().sum::<usize>());
                for (name, count) in names.iter().zip(&held) {
                    proptest::prop_assert_eq!(room.of(name), *count);
                }
            }
        }
    }
}
