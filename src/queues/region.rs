//! Isolation regions: the tag every job carries, which
//! [`isolate`](crate::isolate) (in `fork_join/isolate.rs`) hands out.
//!
//! A worker that waits (in `join`, a scope, `run`, `run_graph`, an
//! `install` into another pool) keeps running other tasks meanwhile. That
//! is what keeps pools that call into each other from deadlocking, but it
//! has a trap rayon's users keep reporting: the waiting frame picks up an
//! unrelated outer task, which grows memory without bound (rayon #1105,
//! #872) or takes a lock the waiting frame already holds (#592, #1174).
//! oneTBB answers with `this_task_arena::isolate`; this is sixfold's.
//!
//! Every job carries the [`Region`] it belongs to: the region of the
//! construct that waits for it (a scope's, a run's, a join's), or, for
//! `'static` work, the region it was spawned in. A worker adopts the region
//! of each job it runs, so a task of a region that another worker stole
//! is isolated on the thief too. A wait in region `r != NONE` is
//! *isolated*: it takes only jobs of `r` (own deque, mailbox, the shared
//! queue's tagged entries, and work another worker lent out around a
//! pipeline stage body) and does not steal; other workers, which are not
//! isolated, still take the region's jobs as usual. A lent job of another
//! region that it took is passed on to the shared queue, not run.
//!
//! Invariants: a region's number is never reused (a 64-bit counter); every
//! job a construct of region `r` waits for carries `r`, so an isolated wait
//! can always run what it waits for (on a one-worker pool nobody else
//! would); `Region::NONE` work is never run by an isolated wait.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The isolation region a job belongs to (`NONE`: not isolated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct Region(u64);

impl Region {
    /// Outside every isolated region.
    pub(crate) const NONE: Region = Region(0);

    /// A region number never handed out before.
    pub(crate) fn fresh() -> Region {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Region(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn is_isolated(self) -> bool {
        self != Region::NONE
    }

    /// As a plain number, for storing in an atomic.
    #[inline]
    pub(crate) fn to_bits(self) -> u64 {
        self.0
    }

    /// Back from `to_bits`.
    #[inline]
    pub(crate) fn from_bits(bits: u64) -> Region {
        Region(bits)
    }
}

thread_local! {
    /// The region of a thread that is not a worker right now. A worker
    /// keeps its own (`WorkerThread::region`), read on every push.
    static OUTSIDE_REGION: Cell<Region> = const { Cell::new(Region::NONE) };
}

/// The region a thread outside every pool is in (a guest worker starts in it).
pub(crate) fn outside_current() -> Region {
    OUTSIDE_REGION.with(Cell::get)
}

/// Put the calling (non-worker) thread in `region`, returning the one it
/// was in.
pub(crate) fn replace_outside(region: Region) -> Region {
    OUTSIDE_REGION.with(|cell| cell.replace(region))
}
