//! One budget of the bytes tenants' decoded objects hold in the controller, every part's
//! together (`--max-object-memory`): what its watches decode ahead of the loops, what the loops
//! hand the evaluator (on the way, queued, under way, and its answers back, with the model's
//! JSON made of each), and what the Cleaners' book keeps of their targets.
//!
//! Each of those parts has a bound of its own, so that one tenant filling it is the one who
//! waits or is let go of. Their bounds were each hard, but added up to more than the
//! controller's share of the chart's memory limit, so a tenant filling them all at once could
//! still take the controller past it (docs/explanation/tenancy.md). This budget bounds the sum,
//! whatever the objects are.
//!
//! An object is charged once, where it is decoded: a watch takes its [`Charge`] before it
//! decodes an event, as does a fetch of one object again ([`ObjectMemory::take`]). The charge
//! then goes where the object goes and is given back when the object is dropped: nothing
//! decoded is held uncharged, and nothing is charged twice. Only a read waits for room, in
//! turn (tokio's semaphore is first come, first served); every holder goes on to hand on or
//! drop what it holds without waiting on this budget, so the waits end. A holder about to make
//! more of its object (the loop, sending one to be made into the model's JSON) grows its
//! charge first, only where there is room at once and no read waits before it
//! ([`Charge::try_grow`]); refused, it lets the object go, to be read again with room for both
//! taken as it is read (`io`'s `Room::ready_making`). The one holder that
//! keeps objects for long, the Cleaners' book, is bounded below this budget by more than one
//! object ([`ObjectMemory::new`] says by how much), so a read always finds room once the
//! evaluator's work ahead of it is done.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget: 64 MiB.
pub const DEFAULT_BYTES: usize = 64 * 1024 * 1024;

/// The bytes decoded objects hold, shared by every part of the process; clones share it.
#[derive(Clone, Debug)]
pub struct ObjectMemory {
    room: Arc<Semaphore>,
    capacity: usize,
}

/// What one object (or several, [`Charge::absorb`]) is charged; given back as it is dropped.
#[derive(Debug, Default)]
#[must_use = "a charge dropped gives its bytes back at once"]
pub struct Charge {
    taken: Option<OwnedSemaphorePermit>,
    /// The budget it was taken from, for [`Charge::try_grow`]; `None` for [`Charge::none`].
    memory: Option<ObjectMemory>,
}

impl ObjectMemory {
    /// A budget of `capacity` bytes. The caller keeps its long-lived holders at least one
    /// object's bound below it, or reads could wait on them for ever.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.min(Semaphore::MAX_PERMITS);
        Self {
            room: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes charged now.
    pub fn held(&self) -> usize {
        self.capacity.saturating_sub(self.room.available_permits())
    }

    /// A charge of `bytes` (all of the budget at most: one heavier object goes alone), once
    /// there is room for it; taken in turn.
    pub async fn take(&self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.capacity);
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        // The semaphore is never closed.
        let taken = self.room.clone().acquire_many_owned(bytes).await.ok();
        Charge {
            taken,
            memory: Some(self.clone()),
        }
    }
}

impl Charge {
    /// Nothing charged, and no budget: what an object no budget applies to (tests) carries.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn bytes(&self) -> usize {
        self.taken
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Takes over what `other` was charged, of the same budget: one holder keeping several
    /// objects.
    pub fn absorb(&mut self, other: Charge) {
        match (&mut self.taken, other.taken) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        self.memory = self.memory.take().or(other.memory);
    }

    /// Charges `bytes` more at once, where the budget has room for them now and no read waits
    /// for room before them; never waits. Whether it did (always, where no budget applies):
    /// what a holder that must not wait does before it makes more of its object.
    pub fn try_grow(&mut self, bytes: usize) -> bool {
        let Some(memory) = &self.memory else {
            return true;
        };
        let Ok(bytes) = u32::try_from(bytes) else {
            return false;
        };
        match memory.room.clone().try_acquire_many_owned(bytes) {
            Ok(more) => {
                let more = Charge {
                    taken: Some(more),
                    memory: None,
                };
                self.absorb(more);
                true
            }
            Err(_) => false,
        }
    }

    /// Gives back all but `bytes` of the charge: what its holder let go of.
    pub fn keep(&mut self, bytes: usize) {
        let Some(taken) = &mut self.taken else {
            return;
        };
        let excess = taken.num_permits().saturating_sub(bytes);
        if excess > 0 {
            drop(taken.split(excess));
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use proptest::prelude::*;

    use super::*;

    const MIB: usize = 1024 * 1024;

    #[tokio::test]
    async fn a_read_waits_until_what_is_held_is_given_back() {
        let memory = ObjectMemory::new(10 * MIB);
        let held = memory.take(6 * MIB).await;
        let mut waiting = Box::pin(memory.take(6 * MIB));
        assert!((&mut waiting).now_or_never().is_none(), "6 + 6 MiB of 10");
        assert_eq!(
            memory.held(),
            10 * MIB,
            "the waiting read holds what it was given so far"
        );
        drop(held);
        let taken = waiting
            .now_or_never()
            .expect("room once the first is dropped");
        assert_eq!((taken.bytes(), memory.held()), (6 * MIB, 6 * MIB));
    }

    #[tokio::test]
    async fn reads_take_their_room_in_turn() {
        let memory = ObjectMemory::new(10 * MIB);
        let held = memory.take(10 * MIB).await;
        let mut heavy = Box::pin(memory.take(8 * MIB));
        let mut light = Box::pin(memory.take(MIB));
        assert!((&mut heavy).now_or_never().is_none());
        assert!((&mut light).now_or_never().is_none());
        drop(held);
        // The light one came later: it waits for the heavy one's turn, though it would fit.
        let heavy = (&mut heavy).now_or_never().expect("the first in line");
        let light = (&mut light).now_or_never().expect("room beside it");
        assert_eq!((heavy.bytes(), light.bytes()), (8 * MIB, MIB));
    }

    #[tokio::test]
    async fn an_object_heavier_than_the_budget_goes_alone() {
        let memory = ObjectMemory::new(4 * MIB);
        let alone = memory.take(16 * MIB).await;
        assert_eq!((alone.bytes(), memory.held()), (4 * MIB, 4 * MIB));
        assert!(memory.take(1).now_or_never().is_none());
    }

    #[tokio::test]
    async fn a_holder_keeps_what_it_absorbed_and_gives_back_what_it_let_go_of() {
        let memory = ObjectMemory::new(10 * MIB);
        let mut book = Charge::none();
        book.absorb(memory.take(3 * MIB).await);
        book.absorb(memory.take(2 * MIB).await);
        book.absorb(Charge::none());
        assert_eq!((book.bytes(), memory.held()), (5 * MIB, 5 * MIB));
        book.keep(MIB);
        assert_eq!((book.bytes(), memory.held()), (MIB, MIB));
        book.keep(4 * MIB);
        assert_eq!(
            book.bytes(),
            MIB,
            "keeping more than is charged takes nothing"
        );
        drop(book);
        assert_eq!(memory.held(), 0);
    }

    #[tokio::test]
    async fn a_holder_grows_its_charge_only_where_there_is_room_and_no_read_waits() {
        let memory = ObjectMemory::new(10 * MIB);
        let mut work = memory.take(4 * MIB).await;
        assert!(work.try_grow(4 * MIB));
        assert_eq!((work.bytes(), memory.held()), (8 * MIB, 8 * MIB));
        assert!(!work.try_grow(4 * MIB), "past the budget");
        assert_eq!(work.bytes(), 8 * MIB, "nothing taken of a refused growth");
        let mut waiting = Box::pin(memory.take(3 * MIB));
        assert!((&mut waiting).now_or_never().is_none());
        assert!(
            !work.try_grow(MIB),
            "the 2 MiB free went to the read waiting: it goes first"
        );
        drop(work);
        assert!(waiting.now_or_never().is_some());
        let mut none = Charge::none();
        assert!(none.try_grow(usize::MAX), "no budget applies to it");
        assert_eq!(none.bytes(), 0);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Take(usize),
        Drop(usize),
        Absorb(usize, usize),
        Keep(usize, usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1..12 * MIB).prop_map(Step::Take),
            any::<usize>().prop_map(Step::Drop),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Absorb(a, b)),
            (any::<usize>(), 0..8 * MIB).prop_map(|(a, bytes)| Step::Keep(a, bytes)),
        ]
    }

    proptest! {
        /// Whatever is taken, merged, cut down and dropped, what is held is what the live
        /// charges hold, never more than the budget, and a read waits exactly while it would
        /// not fit.
        #[test]
        fn what_is_held_never_passes_the_budget(steps in proptest::collection::vec(step(), 1..60)) {
            let memory = ObjectMemory::new(10 * MIB);
            let mut charges: Vec<Charge> = Vec::new();
            for step in steps {
                match step {
                    Step::Take(bytes) => {
                        let taken = bytes.min(memory.capacity());
                        let fits = memory.held() + taken <= memory.capacity();
                        match memory.take(bytes).now_or_never() {
                            Some(charge) => {
                                prop_assert!(fits);
                                prop_assert_eq!(charge.bytes(), taken);
                                charges.push(charge);
                            }
                            None => prop_assert!(!fits),
                        }
                    }
                    Step::Drop(at) if !charges.is_empty() => {
                        let at = at % charges.len();
                        drop(charges.swap_remove(at));
                    }
                    Step::Absorb(a, b) if charges.len() > 1 => {
                        let b = b % charges.len();
                        let theirs = charges.swap_remove(b);
                        let a = a % charges.len();
                        charges[a].absorb(theirs);
                    }
                    Step::Keep(at, bytes) if !charges.is_empty() => {
                        let at = at % charges.len();
                        let before = charges[at].bytes();
                        charges[at].keep(bytes);
                        prop_assert_eq!(charges[at].bytes(), before.min(bytes));
                    }
                    _ => {}
                }
                let live: usize = charges.iter().map(Charge::bytes).sum();
                prop_assert_eq!(memory.held(), live);
                prop_assert!(live <= memory.capacity());
            }
        }
    }
}
