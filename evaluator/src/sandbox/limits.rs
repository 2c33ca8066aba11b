//! The evaluator process's bounds, each held by the operating system or by the parent, never
//! by a foretelling of what an expression will cost:
//!
//! | bound | held by | default |
//! | --- | --- | --- |
//! | address space | `RLIMIT_AS`: an allocation past it fails and the process aborts | [`DEFAULT_MEMORY`] |
//! | CPU time of one step | `RLIMIT_CPU`'s soft bound, set by the process before each step ([`super::child`]): `SIGXCPU` ends it | at most [`STEP_CPU_SECONDS`] + 1 s |
//! | CPU time of its life | `RLIMIT_CPU`'s hard bound; the parent replaces the process first | [`LIFETIME_CPU_SECONDS`] |
//! | stack | the serving thread's stack, [`STACK_BYTES`], with a guard page below it | 32 MiB |
//! | progress | the parent, which kills it after a whole [`DEFAULT_WALL`] without a reply and without using CPU ([`super::Sandbox`]) | |
//! | files | `RLIMIT_NOFILE` [`OPEN_FILES`], `RLIMIT_FSIZE` 0, `RLIMIT_CORE` 0 | |
//! | priority | nice 19, below the controller's loops and the API server | |
//!
//! The process sets them on itself as the first thing it does, before it reads a byte of
//! input, and says so ([`super::protocol::Reply::Ready`]); lowering one's own limits needs no
//! privilege, and raising a hard one back is refused. (Setting them between `fork` and `exec`
//! would take `unsafe`, which this workspace forbids.) An overrun ends the process; the parent
//! starts another and tells the expression that did it ([`super`]).

use std::time::Duration;

/// The evaluator process's address space, by default: its binary's mappings, the serving
/// thread's stack, the expressions it holds, the objects bound, and what an evaluation makes.
pub const DEFAULT_MEMORY: u64 = 192 * 1024 * 1024;

/// The whole seconds of CPU time one step may take beyond the second it began in: the process
/// ends at most `STEP_CPU_SECONDS + 1` seconds of CPU into a step. The meter inside stops an
/// evaluation at 40 ms ([`kube_retention_common::cel::TIME_LIMIT`]); this holds whatever it
/// misjudges.
pub const STEP_CPU_SECONDS: u64 = 1;

/// The CPU time a process may use in its life; the parent replaces it when it asks
/// ([`super::child::SPENT`]), well before.
pub const LIFETIME_CPU_SECONDS: u64 = 3_600;

/// The stack of the thread that evaluates: twice what the deepest admitted expression was
/// measured to need ([`kube_retention_common::cel::stack`]'s `STACK_BYTES`), so that the
/// stack is never grown on the heap for it.
pub const STACK_BYTES: usize = 32 * 1024 * 1024;

/// How long the parent waits for an answer from a process that uses no CPU time meanwhile
/// before it kills it as stuck. The process runs at the lowest priority and may wait long for a
/// core on a loaded node: while it uses CPU it is waited for, its CPU limit bounding how long.
pub const DEFAULT_WALL: Duration = Duration::from_secs(30);

/// The files the process may hold: its three pipes, and a few the runtime may open at start.
pub const OPEN_FILES: u64 = 16;

/// The bounds a [`super::Sandbox`] starts its process with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Address space, in bytes.
    pub memory: u64,
    /// How long the parent waits for an answer from a process using no CPU.
    pub wall: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory: DEFAULT_MEMORY,
            wall: DEFAULT_WALL,
        }
    }
}

impl Limits {
    /// The most CPU time one step may take.
    pub fn step_cpu() -> Duration {
        Duration::from_secs(STEP_CPU_SECONDS + 1)
    }

    /// Sets these bounds on the calling process, for good: the hard limits too, which it
    /// cannot raise again.
    pub fn apply(&self) -> std::io::Result<()> {
        use nix::sys::resource::{Resource, setrlimit};
        let set = |resource, value| setrlimit(resource, value, value).map_err(std::io::Error::from);
        set(Resource::RLIMIT_AS, self.memory)?;
        set(Resource::RLIMIT_CPU, LIFETIME_CPU_SECONDS)?;
        set(Resource::RLIMIT_CORE, 0)?;
        set(Resource::RLIMIT_FSIZE, 0)?;
        set(Resource::RLIMIT_NOFILE, OPEN_FILES)
    }
}
