//! What the evaluator's backlog may hold ([`Bounds`]) and what it let go of to stay within it
//! ([`Dropped`]).

/// How much the queued work may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Waiting to start, in one namespace's lane.
    pub namespace_bytes: usize,
    /// Waiting to start, in every lane together.
    pub queued_bytes: usize,
    /// Under way: no work starts while what is under way holds this much.
    pub started_bytes: usize,
    /// Shed work asked for again and not yet started, across every namespace.
    pub returns: usize,
}

impl Default for Bounds {
    /// A namespace queues at most 8 MiB (five objects at etcd's 1.5 MiB limit), all of them
    /// 32 MiB, and work under way holds about 32 MiB more; four shed works come back at once:
    /// beside the controller's working set and one evaluation's own bound, within the chart's
    /// memory limit (docs/explanation/tenancy.md).
    fn default() -> Self {
        Self {
            namespace_bytes: 8 * 1024 * 1024,
            queued_bytes: 32 * 1024 * 1024,
            started_bytes: 32 * 1024 * 1024,
            returns: 4,
        }
    }
}

/// What the backlog let go of, counted since it began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Replaced by a newer work of the same key before it was done.
    pub superseded: u64,
    /// Shed to stay within the bounds (asked for again at their turn).
    pub shed: u64,
}
