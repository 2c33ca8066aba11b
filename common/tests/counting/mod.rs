// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

//! Memory a piece of work allocates, counted by the test binary's allocator (`cap` around the
//! system's): the bytes it allocated in all, and the most it held at once. The counts are
//! process-wide, so each test that measures holds [`alone`] from its start to its end: no
//! other test of the binary allocates meanwhile.

use std::alloc::System;
use std::sync::{Mutex, MutexGuard};

use cap::Cap;

#[global_allocator]
static COUNTED: Cap<System> = Cap::new(System, usize::MAX);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a piece of work allocated.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Every byte allocated, freed or not.
    pub allocated: usize,
    /// The most held at once beyond what was held before, where the work raised the
    /// process's highest mark (`None` where it did not: it then held less than the mark
    /// less what was held at its start, and something before it held more).
    pub peak: Option<usize>,
}

/// Held by a test for as long as it runs: the other tests of the binary wait.
pub fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `work`, and answers what it gave and what it allocated (hold [`alone`] around it).
pub fn measured<T>(work: impl FnOnce() -> T) -> (T, Usage) {
    let held = COUNTED.allocated();
    let total = COUNTED.total_allocated();
    let mark = COUNTED.max_allocated();
    let result = work();
    let raised = COUNTED.max_allocated();
    let usage = Usage {
        allocated: COUNTED.total_allocated() - total,
        peak: (raised > mark).then(|| raised - held),
    };
    (result, usage)
}
