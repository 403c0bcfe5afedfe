//! Unit credit: a scope job adds the units of its spawns to its group in
//! batches, not one read-modify-write each.
//!
//! Every job spawned into a scope holds a unit of the scope's group, and
//! the count lives on one cache line that every worker of the scope writes:
//! a spawn's increment and a job's final decrement each move that line
//! between cores. So the scope job running on a thread (and the scope's
//! body on its owner) opens a *credit frame* for its group: its first spawn
//! adds `CREDIT_BATCH` units at once, its next spawns take units from the
//! frame without touching the count, and the frame's leftover units go
//! back with the job's own unit, in the one decrement it makes as its last
//! act anyway. A binary tree of scope jobs then writes the count 1.5 times
//! a job instead of twice, a flat loop of spawns once a batch.
//!
//! Invariants: credit units are real units of the count, held by the frame
//! that added them, which lives (and holds its own unit) until it releases
//! them, so the count cannot reach zero while any frame holds credit; a
//! frame's units are used only for its own group, by code running on its
//! thread above it (the job's body, or what that body runs inline: a
//! `join`'s halves, a nested wait's jobs), which ends before the frame does;
//! frames nest and are restored in order, because the function run inside
//! a frame never unwinds (callers catch panics inside it).

use crate::worker::group::Group;
use std::cell::Cell;
use std::ptr;

/// Units added at once when a frame runs out.
const CREDIT_BATCH: usize = 32;

/// A credit frame: its group and the units it still holds for spawns.
#[derive(Clone, Copy)]
struct UnitCredit {
    group: *const Group,
    units: usize,
}

/// The credit frames of one thread (a field of its `WorkerThread`): only
/// the innermost is kept here, the outer ones on the stack of the calls
/// that opened them.
pub(crate) struct CreditFrames {
    innermost: Cell<UnitCredit>,
}

impl CreditFrames {
    pub(crate) const fn new() -> Self {
        CreditFrames {
            innermost: Cell::new(UnitCredit {
                group: ptr::null(),
                units: 0,
            }),
        }
    }

    /// Run `f` (which must not unwind) in a credit frame for `group`;
    /// returns its result and the frame's leftover units, which the caller
    /// releases together with its own unit.
    #[inline]
    pub(crate) fn with_frame<R>(&self, group: &Group, f: impl FnOnce() -> R) -> (R, usize) {
        let outer = self.innermost.replace(UnitCredit { group, units: 0 });
        let result = f();
        let ours = self.innermost.replace(outer);
        debug_assert!(ptr::eq(ours.group, group), "credit frames nest");
        (result, ours.units)
    }

    /// A unit of `group` for a job about to be spawned into it from this
    /// thread: from the innermost credit frame if it is `group`'s (adding a
    /// batch when it is empty), else added to the count on its own.
    #[inline]
    pub(crate) fn take_unit(&self, group: &Group) {
        let mut credit = self.innermost.get();
        if !ptr::eq(credit.group, group) {
            group.add_unit();
            return;
        }
        if credit.units == 0 {
            group.add_units(CREDIT_BATCH);
            credit.units = CREDIT_BATCH;
        }
        credit.units -= 1;
        self.innermost.set(credit);
    }
}
