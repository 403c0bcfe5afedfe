//! Releasing one unit of a task node's pending count: the protocol every
//! completion, cancellation and hand-over goes through.
//!
//! A count holds one unit per holder: each predecessor not yet completed,
//! a handle that has not submitted the node, the running node a
//! `Continuation` belongs to. A unit is added only by the holder of
//! another (`continuation.rs`), so a holder that sees how many units are
//! left knows who can still move the count:
//!
//! - at 1 the unit is ours alone: a plain store of 0 releases it, after an
//!   Acquire load that pairs with every earlier release (the last release
//!   of every node goes this way);
//! - at 2, with the other unit held by a job we have just popped off our
//!   own deque (a continuation-passing fork's spawned child, still on top
//!   when the recycled parent finishes: `release_or_sibling`), both units
//!   are ours, and a plain store of 1 releases ours. The load came before
//!   the pop, but nothing can move the count in between: the child was on
//!   the deque, not running, and a thief that took it first makes the pop
//!   give something else back. Whoever releases the last unit later reads
//!   1 after our store: this thread, or one that got the unit through a
//!   queue or count whose synchronisation follows the store;
//! - otherwise an AcqRel read-modify-write: it releases our writes to the
//!   node's next owner and acquires everyone else's if we are that owner.
//!
//! `tests/loom_pending.rs` (graphs' counts) and `tests/loom_sibling.rs`
//! model these; `tests/continuation_stress.rs` races children against
//! their parents.

use crate::platform::sync::{AtomicU32, Ordering};

/// Release one unit of a pending count; true if it was the last (the
/// caller owns the node now).
#[inline]
pub(crate) fn release_count(pending: &AtomicU32) -> bool {
    // Fast path: our unit is the only one left, so nobody else can touch
    // the count: a unit can only be added by a holder of another unit (a
    // handle, or the running node a `Continuation` belongs to, which is
    // itself a predecessor). A plain load and store replace the
    // read-modify-write (the last release of every node goes this way).
    // Acquire pairs with the release of every earlier decrement.
    if pending.load(Ordering::Acquire) == 1 {
        pending.store(0, Ordering::Relaxed);
        return true;
    }
    // AcqRel: release our writes to the node to its next owner, acquire the
    // writes of every earlier releaser if we are that owner.
    pending.fetch_sub(1, Ordering::AcqRel) == 1
}

/// Where `release_or_sibling` looks for the other holder of a count: the
/// top of our deque. (A trait, not a closure: its call stays inline on
/// the path every continuation-passing fork takes.)
pub(crate) trait TakeSibling {
    type Job;
    /// The newest job of our deque if it holds the other unit, taken off
    /// the deque; else None, and the deque as it was.
    fn take(self) -> Option<Self::Job>;
}

/// What releasing a unit beside a sibling did (`release_or_sibling`).
pub(crate) enum Release<J> {
    /// Ours was the last unit: the node is ready, and the caller owns it.
    Last,
    /// Units are left to other holders.
    NotLast,
    /// The count was 2 and its other holder was the job `take_sibling`
    /// gave back: our unit is released, and that job runs next.
    Sibling(J),
}

/// Release our unit of a pending count, as `release_count` does, but when
/// the count is 2 ask `take_sibling` first for the job on top of our own
/// deque if it holds the other unit (it gives the job back only if so,
/// and leaves the deque as it was otherwise): then a plain store of 1
/// releases ours. One load decides. (Why the count cannot move between
/// that load and the store: the module documentation.)
#[inline(always)]
pub(crate) fn release_or_sibling<S: TakeSibling>(
    pending: &AtomicU32,
    sibling: S,
) -> Release<S::Job> {
    // Acquire: as in `release_count`.
    match pending.load(Ordering::Acquire) {
        1 => {
            pending.store(0, Ordering::Relaxed);
            return Release::Last;
        }
        2 => {
            if let Some(job) = sibling.take() {
                // Our unit, released: the sibling holds the last one.
                pending.store(1, Ordering::Relaxed);
                return Release::Sibling(job);
            }
        }
        _ => {}
    }
    // As in `release_count`: the count may have moved since the load.
    if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        Release::Last
    } else {
        Release::NotLast
    }
}
