//! Which of its two modes a shared LIFO deque's owner pops in, and when it
//! changes modes (the modes themselves: `chase_lev.rs`'s module docs).
//!
//! In the fast mode the owner's pop has only a compiler barrier where the
//! fenced mode has a SeqCst fence, and every thief pays the heavy half of
//! an asymmetric fence. A steal shows itself to the owner as a `front`
//! that moved since it last looked: the owner goes fenced at the first
//! push or pop that sees one, and fast again after `QUIET_POPS` fenced
//! pops that saw none.
//!
//! Invariants: only the owner calls these methods (the state is cells on
//! its end of the deque); `fenced` (the one flag thieves read) is false
//! exactly while the owner pops fast; going fenced publishes with Release
//! after the last fast pop; going fast fences before the first one.

use crate::platform::sync::{AtomicBool, Ordering, fence};
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

/// The owner's side of the pop mode.
pub(super) struct PopMode {
    /// Popping fast: `fenced` is false.
    fast: Cell<bool>,
    /// `front` as the owner last saw it: a change is a steal.
    seen_front: Cell<isize>,
    /// Fenced pops in a row that found no steal.
    quiet_pops: Cell<u32>,
    /// Whether the deque has an asymmetric fence (else it stays fenced).
    may_go_fast: bool,
}

impl PopMode {
    /// Fast if the deque may be (then `fenced` starts false), else fenced.
    pub(super) fn new(may_go_fast: bool) -> Self {
        PopMode {
            fast: Cell::new(may_go_fast),
            seen_front: Cell::new(0),
            quiet_pops: Cell::new(0),
            may_go_fast,
        }
    }

    #[inline(always)]
    pub(super) fn is_fast(&self) -> bool {
        self.fast.get()
    }

    /// A push read `front` as `f`: a producer that spawns and never pops
    /// would otherwise leave every steal paying the heavy barrier.
    #[inline(always)]
    pub(super) fn push_saw_front(&self, f: isize, fenced: &AtomicBool) {
        if self.fast.get() && f != self.seen_front.get() {
            self.go_fenced(f, fenced);
        }
    }

    /// A pop read `front` as `f`: a steal since the last look ends the
    /// fast mode, and `QUIET_POPS` fenced pops without one end the fenced
    /// mode.
    #[inline(always)]
    pub(super) fn pop_saw_front(&self, f: isize, fenced: &AtomicBool) {
        if self.fast.get() {
            if f != self.seen_front.get() {
                self.go_fenced(f, fenced);
            }
        } else if self.may_go_fast {
            self.count_fenced_pop(f, fenced);
        }
    }

    /// The owner's own claim moved `front` to `f`: no thief's.
    #[inline]
    pub(super) fn claimed_front(&self, f: isize) {
        self.seen_front.set(f);
    }

    /// `pop_saw_front` in the fenced mode: out of line, so the fast mode's
    /// pop stays short (this one has a fence to pay anyway).
    #[inline(never)]
    fn count_fenced_pop(&self, f: isize, fenced: &AtomicBool) {
        if f != self.seen_front.get() {
            self.seen_front.set(f);
            self.quiet_pops.set(0);
            return;
        }
        let quiet = self.quiet_pops.get() + 1;
        self.quiet_pops.set(quiet);
        if quiet >= QUIET_POPS {
            self.go_fast(fenced);
        }
    }

    /// A thief stole while we popped fast: fence from now on, so the next
    /// thieves need no system call.
    #[cold]
    pub(super) fn go_fenced(&self, f: isize, fenced: &AtomicBool) {
        // Release: a thief that reads `true` sees every pop before this
        // one, and every pop after it fences.
        fenced.store(true, Ordering::Release);
        self.fast.set(false);
        self.seen_front.set(f);
        self.quiet_pops.set(0);
    }

    /// No steal for a while: pop fast again.
    #[cold]
    fn go_fast(&self, fenced: &AtomicBool) {
        self.quiet_pops.set(0);
        fenced.store(false, Ordering::Relaxed);
        // Pairs with the fence a thief has between its loads of `front`
        // and `fenced` (`chase_lev::steal_asymmetric`): one that still
        // reads `true` read a `front` that our fast pops will see.
        fence(Ordering::SeqCst);
        self.fast.set(true);
    }
}
