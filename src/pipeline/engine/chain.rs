//! A job's chain of slots, and the list of tokens it retires.
//!
//! A chain is the set of slots one job owns, front to back, linked through
//! the slots' `next` words: its items, then its free tokens. Items come
//! in source order but for those an any-order gate handed over, which go
//! right behind the item that finished there. A `Chain` is only ever made
//! from slots the job owns (`single`, `chain_from`, the pushes), so its
//! front is ours to read (`front`).
//! Retired tokens (those that found the source exhausted) are listed
//! through the same links and release their latch units as the job's very
//! last act (`Retired::release`): the run may end with the last one.

use super::Engine;
use super::slot::{NO_SLOT, Owned};
use crate::platform::latch::CountLatch;
use std::sync::atomic::Ordering;

/// The slots a job owns, front to back, linked through the slots.
pub(super) struct Chain {
    head: u32,
    tail: u32,
}

impl Chain {
    pub(super) const EMPTY: Chain = Chain {
        head: NO_SLOT,
        tail: NO_SLOT,
    };

    /// A chain of `slot` alone (its link is cleared).
    pub(super) fn single(slot: Owned<'_>) -> Chain {
        slot.state().next.set(NO_SLOT);
        Chain {
            head: slot.index(),
            tail: slot.index(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head == NO_SLOT
    }
}

/// Tokens that found the source exhausted (or the run cancelled), linked
/// through their slots, each to release its latch unit.
pub(super) struct Retired(u32);

impl Retired {
    pub(super) const NONE: Retired = Retired(NO_SLOT);

    pub(super) fn push(&mut self, slot: Owned<'_>) {
        slot.state().next.set(self.0);
        self.0 = slot.index();
    }
}

impl<'a> Engine<'a> {
    /// The chain that starts at `head`, with its tail found by its links.
    pub(super) fn chain_from(&self, head: Owned<'_>) -> Chain {
        let mut tail = head;
        while let Some(next) = self.next_of(tail) {
            tail = next;
        }
        Chain {
            head: head.index(),
            tail: tail.index(),
        }
    }

    /// The front slot of `chain`, if any: ours, as the chain is.
    #[inline]
    pub(super) fn front(&self, chain: &Chain) -> Option<Owned<'_>> {
        // SAFETY: a `Chain` holds only slots its job owns (see the type).
        (!chain.is_empty()).then(|| unsafe { self.claim(chain.head) })
    }

    /// The slot behind `slot` in its chain: ours, as `slot` is.
    #[inline]
    pub(super) fn next_of(&self, slot: Owned<'_>) -> Option<Owned<'_>> {
        let next = slot.state().next.get();
        // SAFETY: a link of an owned slot leads into the same chain.
        (next != NO_SLOT).then(|| unsafe { self.claim(next) })
    }

    /// Take the front slot off `chain`.
    pub(super) fn pop_front(&self, chain: &mut Chain) -> Option<Owned<'_>> {
        let front = self.front(chain)?;
        chain.head = front.state().next.get();
        if chain.head == NO_SLOT {
            chain.tail = NO_SLOT;
        }
        Some(front)
    }

    /// Put `slot`, which is in no chain, at the back of `chain`.
    pub(super) fn push_back(&self, chain: &mut Chain, slot: Owned<'_>) {
        slot.state().next.set(NO_SLOT);
        if chain.tail == NO_SLOT {
            chain.head = slot.index();
        } else {
            // SAFETY: the chain's tail is ours, as the chain is.
            unsafe { self.claim(chain.tail) }
                .state()
                .next
                .set(slot.index());
        }
        chain.tail = slot.index();
    }

    /// Put `slot`, which is in no chain, at the front of `chain`.
    pub(super) fn push_front(&self, chain: &mut Chain, slot: Owned<'_>) {
        slot.state().next.set(chain.head);
        chain.head = slot.index();
        if chain.tail == NO_SLOT {
            chain.tail = slot.index();
        }
    }

    /// Put `next`, which is in no chain, right behind `current`.
    pub(super) fn insert_after(&self, chain: &mut Chain, current: Owned<'_>, next: Owned<'_>) {
        next.state().next.set(current.state().next.get());
        current.state().next.set(next.index());
        if chain.tail == current.index() {
            chain.tail = next.index();
        }
    }

    /// Take `current` (right behind `before`, or at the front) out of
    /// `chain`; `replacement`, if given, takes its place, linked to
    /// whatever followed `current` (`behind`).
    pub(super) fn unlink(
        &self,
        chain: &mut Chain,
        before: Option<Owned<'_>>,
        current: u32,
        behind: u32,
        replacement: Option<Owned<'_>>,
    ) {
        let next = match replacement {
            Some(other) => {
                other.state().next.set(behind);
                other.index()
            }
            None => behind,
        };
        match before {
            Some(prev) => prev.state().next.set(next),
            None => chain.head = next,
        }
        if chain.tail == current {
            chain.tail = match (replacement, before) {
                (Some(other), _) => other.index(),
                (None, Some(prev)) => prev.index(),
                (None, None) => NO_SLOT,
            };
        }
    }

    /// Move every token of `chain` to `retired`.
    pub(super) fn retire_chain(&self, chain: &mut Chain, retired: &mut Retired) {
        while let Some(token) = self.pop_front(chain) {
            retired.push(token);
        }
    }

    /// Release the latch units of the `retired` tokens.
    ///
    /// # Safety
    /// The engine may be gone the moment this returns (if these were the
    /// run's last units): the caller touches nothing of the run afterwards
    /// unless it still owns other tokens.
    pub(super) unsafe fn release(&self, retired: Retired) {
        let latch = self.latch.load(Ordering::Relaxed);
        let mut at = retired.0;
        while at != NO_SLOT {
            // SAFETY: retired tokens stay ours until their unit goes; the
            // link is read before the release that may end the run.
            let next = unsafe { self.claim(at) }.state().next.get();
            // SAFETY: the latch lives until its count, which includes this
            // token, reaches zero; after the last of ours nothing is read.
            unsafe { CountLatch::release(latch) };
            at = next;
        }
    }
}
