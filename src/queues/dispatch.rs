//! Which queue a ready task goes to when it is not run at once: the
//! choice between `spawn` and `enqueue`.

/// Where a ready task or graph node goes when the worker that made it ready
/// does not run it at once (rules 1 and 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// The deque of the worker that made it ready: LIFO, cache-warm, and
    /// stolen by idle workers (rules 3 and 6). The default.
    #[default]
    Spawn,
    /// The shared queue: approximately FIFO, fair, and guaranteed to run
    /// eventually even while every worker has local work (rule 5). A node
    /// with this dispatch is never run by rule 2.
    Enqueue,
}

/// In an affinity kept as a `u32` worker index (task and graph nodes), the
/// bit that makes it *strict*: the task runs on that worker and nowhere
/// else, reached through its mailbox only (no proxy), so no other worker
/// ever takes it. Worker indices stay far below it.
pub(crate) const STRICT_AFFINITY: u32 = 1 << 31;
