//! Which of its two modes a shared LIFO deque's owner pops in, and when it
//! changes modes (the modes themselves: `chase_lev.rs`'s module docs).
//!
//! In the fast mode the owner's pop has only a compiler barrier where the
//! fenced mode has a SeqCst fence, and every thief pays the heavy half of
//! an asymmetric fence. A steal shows itself to the owner as a `front`
//! that moved since it last looked: the owner goes fenced at the first
//! push or pop that sees one, and fast again after `QUIET_POPS` fenced
//! pops that saw none. A thief that paid the heavy barrier and took
//! nothing (the owner popped the item first) leaves no such trace, so it
//! overwrites the owner's record of `front` with `FENCE_REQUESTED`:
//! otherwise an idle worker's search, visiting a fork-join's deque while
//! its one item comes and goes, paid the barrier (and interrupted the
//! owner) at every visit.
//!
//! Invariants: only the owner changes modes (`PopMode`'s cells are on its
//! end of the deque); `SharedMode::fenced`, the flag thieves read, is
//! false exactly while the owner pops fast; going fenced publishes with
//! Release after the last fast pop; going fast fences before the first
//! one. A lost request (the owner's own write of `seen_front` racing it)
//! costs only speed: every thief of a fast deque pays the barrier.

use crate::platform::sync::{AtomicBool, AtomicIsize, Ordering, fence};
use std::cell::Cell;

/// Fenced pops in a row without a steal before the owner goes fast
/// again. A wrong guess costs the next thief a system call (about 9 us);
/// 4096 fenced pops cost about as much. (One in the loom model and four in
/// the unit tests, so that short runs change modes often.)
const QUIET_POPS: u32 = if cfg!(loom) {
    1
} else if cfg!(test) {
    4
} else {
    4096
};

/// What no `front` ever is: `front` starts at 0 and only grows.
const FENCE_REQUESTED: isize = isize::MIN;

/// The part of the mode in the deque's shared state, beside `front` and
/// `back` (the owner reads that line at every pop anyway).
pub(super) struct SharedMode {
    /// Whether the owner's pops are fenced, so thieves need no heavy
    /// barrier; written only by the owner.
    fenced: AtomicBool,
    /// `front` as the owner last saw it, or `FENCE_REQUESTED`.
    seen_front: AtomicIsize,
}

impl SharedMode {
    /// Whether the owner's pops are fenced (Acquire: pairs with
    /// `PopMode::go_fenced`).
    #[inline]
    pub(super) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// A thief paid the heavy barrier: ask the owner to go fenced.
    #[inline]
    pub(super) fn request_fence(&self) {
        self.seen_front.store(FENCE_REQUESTED, Ordering::Relaxed);
    }
}

/// The owner's side of the pop mode.
pub(super) struct PopMode {
    /// Popping fast: `fenced` is false.
    fast: Cell<bool>,
    /// Fenced pops in a row that found no steal.
    quiet_pops: Cell<u32>,
    /// Whether the deque has an asymmetric fence (else it stays fenced).
    may_go_fast: bool,
}

impl PopMode {
    /// Fast if the deque may be, else fenced; and the shared part to match.
    pub(super) fn new(may_go_fast: bool) -> (Self, SharedMode) {
        let owner = PopMode {
            fast: Cell::new(may_go_fast),
            quiet_pops: Cell::new(0),
            may_go_fast,
        };
        let shared = SharedMode {
            fenced: AtomicBool::new(!may_go_fast),
            seen_front: AtomicIsize::new(0),
        };
        (owner, shared)
    }

    #[inline(always)]
    pub(super) fn is_fast(&self) -> bool {
        self.fast.get()
    }

    /// A push read `front` as `f`: a producer that spawns and never pops
    /// would otherwise leave every steal paying the heavy barrier.
    #[inline(always)]
    pub(super) fn push_saw_front(&self, f: isize, shared: &SharedMode) {
        if self.fast.get() && f != shared.seen_front.load(Ordering::Relaxed) {
            self.go_fenced(f, shared);
        }
    }

    /// A pop read `front` as `f`: a steal (or a thief's request) since the
    /// last look ends the fast mode, and `QUIET_POPS` fenced pops without
    /// one end the fenced mode.
    #[inline(always)]
    pub(super) fn pop_saw_front(&self, f: isize, shared: &SharedMode) {
        if self.fast.get() {
            if f != shared.seen_front.load(Ordering::Relaxed) {
                self.go_fenced(f, shared);
            }
        } else if self.may_go_fast {
            self.count_fenced_pop(f, shared);
        }
    }

    /// The owner's own claim moved `front` to `f`: no thief's.
    #[inline]
    pub(super) fn claimed_front(&self, f: isize, shared: &SharedMode) {
        shared.seen_front.store(f, Ordering::Relaxed);
    }

    /// `pop_saw_front` in the fenced mode: out of line, so the fast mode's
    /// pop stays short (this one has a fence to pay anyway).
    #[inline(never)]
    fn count_fenced_pop(&self, f: isize, shared: &SharedMode) {
        if f != shared.seen_front.load(Ordering::Relaxed) {
            shared.seen_front.store(f, Ordering::Relaxed);
            self.quiet_pops.set(0);
            return;
        }
        let quiet = self.quiet_pops.get() + 1;
        self.quiet_pops.set(quiet);
        if quiet >= QUIET_POPS {
            self.go_fast(shared);
        }
    }

    /// A thief stole (or asked) while we popped fast: fence from now on,
    /// so the next thieves need no system call.
    #[cold]
    pub(super) fn go_fenced(&self, f: isize, shared: &SharedMode) {
        // Release: a thief that reads `true` sees every pop before this
        // one, and every pop after it fences.
        shared.fenced.store(true, Ordering::Release);
        shared.seen_front.store(f, Ordering::Relaxed);
        self.fast.set(false);
        self.quiet_pops.set(0);
    }

    /// No steal for a while: pop fast again.
    #[cold]
    fn go_fast(&self, shared: &SharedMode) {
        self.quiet_pops.set(0);
        shared.fenced.store(false, Ordering::Relaxed);
        // Pairs with the fence a thief has between its loads of `front`
        // and `fenced` (`chase_lev::steal_asymmetric`): one that still
        // reads `true` read a `front` that our fast pops will see.
        fence(Ordering::SeqCst);
        self.fast.set(true);
    }
}
