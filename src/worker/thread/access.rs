//! What a wait may take besides its own deque and mailbox (`WaitAccess`):
//! the guards that keep a nested wait bounded (see `wait.rs`), read by
//! the search for work (`search.rs`) at every look.
//!
//! Invariant: a wait's access is decided once, where the wait starts, and
//! does not change while it lasts.

use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;

/// What a wait may take besides its own deque and mailbox.
pub(crate) struct WaitAccess<'a> {
    /// Rule 5, the enqueue lanes: always at the outermost level.
    pub(super) shared: SharedAccess<'a>,
    /// Rule 6: false once a nested wait is past half of its stack.
    pub(super) steal: bool,
    /// An isolated wait takes only this region's jobs, from every source,
    /// lent work included, and does not steal (`NONE`: not isolated).
    pub(super) region: Region,
}

pub(super) enum SharedAccess<'a> {
    Always,
    Never,
    /// Only the waited-for work's own enqueued tasks, kept apart under
    /// this key (`SharedQueueFlag::keep_apart`).
    KeptApart(u64),
    /// When the waited-for work has used the shared queue (work whose
    /// tasks were not kept apart: its wait was not known to be nested when
    /// it was submitted).
    IfSet(&'a SharedQueueFlag),
}

impl WaitAccess<'_> {
    /// The outermost loop of a worker: all six rules.
    pub(super) const OUTERMOST: WaitAccess<'static> = WaitAccess {
        shared: SharedAccess::Always,
        steal: true,
        region: Region::NONE,
    };

    /// A wait in isolated region `region`.
    pub(super) fn isolated(region: Region) -> WaitAccess<'static> {
        WaitAccess {
            shared: SharedAccess::Never,
            steal: false,
            region,
        }
    }

    /// May it take from the enqueue lanes?
    #[inline]
    pub(super) fn may_take_shared(&self) -> bool {
        match self.shared {
            SharedAccess::Always => true,
            SharedAccess::Never | SharedAccess::KeptApart(_) => false,
            SharedAccess::IfSet(flag) => flag.is_set(),
        }
    }

    /// The key of the kept-apart tasks it may take (0: none).
    #[inline]
    pub(super) fn kept_apart_key(&self) -> u64 {
        match self.shared {
            SharedAccess::KeptApart(key) => key,
            _ => 0,
        }
    }
}
