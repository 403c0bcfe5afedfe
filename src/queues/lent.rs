//! A worker's lent work: one offer that other workers may take while the
//! worker runs something that may take long, and that the worker takes
//! back, most of the time, a moment later.
//!
//! A pipeline chain offers the rest of its chain around each stage body
//! (`pipeline/engine/lend.rs`): if the body blocks, an idle worker takes
//! the rest; if the body is light, the owner takes it back after it. A
//! deque push and pop did that before, but a thief woken by the pipeline
//! heartbeat then stole the offer of a light item as readily as a blocked
//! one, and split a one-worker run into a slower shared one. Here a thief
//! takes an offer only if it is the same offer it saw at its previous look
//! (`lends` unchanged): the owner has been inside one body for at least
//! the time between two looks.
//!
//! The protocol: the owner writes what it offers, then publishes its
//! address (`offer`, a Release store); it withdraws with one swap, and a
//! thief takes with one CAS, both to null, so exactly one of them gets a
//! non-null pointer back (`tests/loom_lent.rs` checks every interleaving).
//! Whoever gets it owns what it points at; the owner does not touch the
//! offered memory again unless its swap got it back.
//!
//! Invariants: only the owner stores a non-null pointer, and only while
//! none is offered (an offer nested in a body that runs inside another
//! offer's body is refused: the caller falls back to its deque); `lends`
//! is written by the owner alone and only grows.

use crate::platform::sync::{AtomicPtr, AtomicU64, Ordering};
use std::cell::Cell;
use std::ptr::{self, NonNull};

/// One worker's offer (see the module documentation).
pub(crate) struct LentSlot<T> {
    /// How many offers the owner has made.
    lends: AtomicU64,
    /// The offer, or null.
    offered: AtomicPtr<T>,
}

impl<T> Default for LentSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LentSlot<T> {
    pub(crate) fn new() -> Self {
        LentSlot {
            lends: AtomicU64::new(0),
            offered: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Owner: is an offer of ours out (not withdrawn, not taken)?
    #[inline]
    pub(crate) fn is_offered(&self) -> bool {
        !self.offered.load(Ordering::Relaxed).is_null()
    }

    /// Owner: offer `item`. False, and nothing offered, if an earlier offer
    /// is still out.
    ///
    /// # Safety
    /// Only the slot's owner calls `offer` and `withdraw`. `item` stays
    /// valid, unchanged, until a thief that took it has read it (or the
    /// owner withdrew it): whoever gets the pointer owns it.
    #[inline]
    pub(crate) unsafe fn offer(&self, item: NonNull<T>) -> bool {
        if !self.offered.load(Ordering::Relaxed).is_null() {
            return false;
        }
        let lends = self.lends.load(Ordering::Relaxed);
        self.lends.store(lends + 1, Ordering::Relaxed);
        // Release: a thief that takes the pointer sees what it points at.
        self.offered.store(item.as_ptr(), Ordering::Release);
        true
    }

    /// Owner: take the offer back. True if it was still there (it is ours
    /// again); false if a thief took it.
    ///
    /// # Safety
    /// As `offer`, after an `offer` that returned true.
    #[inline]
    pub(crate) unsafe fn withdraw(&self) -> bool {
        !self
            .offered
            .swap(ptr::null_mut(), Ordering::AcqRel)
            .is_null()
    }

    /// Thief: take the offer if it is the one seen at this thief's last
    /// look (`seen`, the thief's own record for this slot), else note it.
    #[inline]
    pub(crate) fn take_if_stale(&self, seen: &Cell<u64>) -> Option<NonNull<T>> {
        let offered = self.offered.load(Ordering::Relaxed);
        if offered.is_null() {
            return None;
        }
        // Read after the offer: at least the count of that offer (it was
        // written before it), maybe a later one's; a later offer at the
        // same address may be taken as if it were the one seen, which is
        // as safe (any offer may be taken) and just as rare.
        let lends = self.lends.load(Ordering::Relaxed);
        if lends != seen.get() {
            seen.set(lends);
            return None;
        }
        // Acquire: what the owner wrote before offering is visible.
        self.offered
            .compare_exchange(
                offered,
                ptr::null_mut(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .ok()
            .and_then(NonNull::new)
    }
}
