//! Serial stages without a lock and without a blocked thread: the gates.
//!
//! A serial stage runs one item at a time. An item that finds its stage
//! busy (or, in order, not yet its turn) is *parked* in the stage's gate
//! and its worker moves on; the worker that finishes the stage's current
//! item takes the next parked one (rule 2). No thread waits.
//!
//! * [`InOrderGate`] (`serial_in_order`): items pass in source order. A
//!   ring of one place per token holds parked items by sequence number; it
//!   cannot wrap, because the items in flight have sequence numbers within
//!   one window of `tokens` (an item needs a token, and the oldest item in
//!   flight holds one).
//! * [`AnyOrderGate`] (`serial_out_of_order`, and the source, whose
//!   "items" are tokens waiting to fetch): one at a time, in any order; the
//!   parked items wait in a bounded queue.
//!
//! Both have the same race window: an item arrives just as the holder
//! leaves. The in-order gate closes it Dekker's way with SeqCst fences: an
//! arriver stores its place, fences, then reads the turn; a leaver stores
//! the turn, fences, then reads the place; the fences are totally ordered,
//! so one of them sees the other's store. (Fences, not SeqCst accesses:
//! loom models SeqCst accesses as AcqRel, and a parking item must not
//! write the turn word, whose cache line stays with the worker running the
//! stage.) The any-order gate keeps its busy bit and count of parked items
//! in one word changed only by read-modify-writes (AcqRel), which are
//! totally ordered. Either way one compare-exchange decides who takes the
//! item: it is never stranded (parked with the gate free and nobody
//! coming) and never taken twice.
//! `tests/loom_gate.rs` checks both gates with loom; `tests/pipeline.rs`
//! detects two items inside one serial stage.
//!
//! Invariants: at most one holder per gate; a parked item is taken exactly
//! once; `InOrderGate` lets item `s` in only after `s - 1` finished; an
//! any-order gate's count never exceeds its queue's length, and the gate
//! is never free with a parked item announced. A slot index names a token,
//! not an item: a token comes back with its next item, so no arriver may
//! tell its own item from a parked one by the index alone (an any-order
//! arriver that takes the gate is always handed the first parked item).

use crate::platform::sync::{AtomicU32, AtomicU64, Ordering, fence};
use std::cell::UnsafeCell;

/// A slot index (a token) plus one, so that 0 means "empty".
const EMPTY: u32 = 0;

/// The turn word of an in-order gate: `(next sequence << 1) | running`.
const RUNNING: u64 = 1;

/// What an arriving item got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// The gate is ours: run the stage on our item.
    Enter,
    /// Parked: a holder will take our item (or has taken it already).
    Parked,
    /// We parked our item, then took the gate for the first parked item
    /// (any-order gates only): run the stage on it. It may be our own
    /// slot, but the caller must take it as an item handed over, not as
    /// the item it brought: a holder may have run that one, and the slot
    /// come back with the next.
    Switch(u32),
}

/// A serial stage that lets items through in sequence order.
pub(crate) struct InOrderGate {
    turn: AtomicU64,
    /// Parked items by `sequence % len`: slot index + 1, or `EMPTY`.
    ring: Box<[AtomicU32]>,
}

impl InOrderGate {
    pub(crate) fn new(tokens: usize) -> Self {
        // A power of two, so a place is a mask away, not a division.
        let places = tokens.next_power_of_two();
        InOrderGate {
            turn: AtomicU64::new(0),
            ring: (0..places).map(|_| AtomicU32::new(EMPTY)).collect(),
        }
    }

    /// For a new run: sequence numbers start at 0 again. Only while no
    /// item is in flight.
    pub(crate) fn reset(&self) {
        self.turn.store(0, Ordering::Relaxed);
        for place in self.ring.iter() {
            place.store(EMPTY, Ordering::Relaxed);
        }
    }

    fn place(&self, sequence: u64) -> &AtomicU32 {
        &self.ring[(sequence as usize) & (self.ring.len() - 1)]
    }

    /// Item `sequence` (in slot `slot`) arrives.
    pub(crate) fn arrive(&self, sequence: u64, slot: u32) -> Arrival {
        let free = sequence << 1;
        // Straight to the read-modify-write, without a read first: the line
        // comes over once, owned (usually it is our turn by now: callers
        // arrive when they have nothing else to do).
        if self.take(free) {
            return Arrival::Enter;
        }
        // Not our turn yet: park, without writing the turn word (its line
        // stays with the worker running the stage). Dekker with `finish`:
        // we store our place, fence, look at the turn; the leaver stores
        // the turn, fences, looks at our place. One sees the other.
        let place = self.place(sequence);
        place.store(slot + 1, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.turn.load(Ordering::Acquire) == free && self.take(free) {
            // The leaver missed our place: we go in ourselves.
            place.store(EMPTY, Ordering::Relaxed);
            return Arrival::Enter;
        }
        Arrival::Parked
    }

    /// Enter the gate for item `sequence` if it is its turn now; false
    /// (and nothing changed) if not.
    pub(crate) fn try_enter(&self, sequence: u64) -> bool {
        self.take(sequence << 1)
    }

    /// Take the gate at turn `free`; false if someone else did.
    fn take(&self, free: u64) -> bool {
        self.turn
            .compare_exchange(free, free | RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Items up to `sequence - 1` went through without using the gate (a
    /// run on one worker holding every token): `sequence` is next. Only
    /// while nobody else can use the gate.
    pub(crate) fn skip_to(&self, sequence: u64) {
        self.turn.store(sequence << 1, Ordering::Relaxed);
    }

    /// Item `sequence` leaves and hands the gate straight to item
    /// `sequence + 1`, which its caller owns (it has not arrived yet, and
    /// will not: it enters without arriving). The turn word is not
    /// written: it says "running" since the holder took the gate, which is
    /// all an arriver needs to park, and items parked behind wait for the
    /// `finish` of the last item the holder passes the gate to. Writing it
    /// per item would move its cache line away from every worker that
    /// looks at it (a miss per look: 7% of a heavy pipeline's time).
    pub(crate) fn pass_on(&self, sequence: u64) {
        if cfg!(debug_assertions) {
            let turn = self.turn.load(Ordering::Relaxed);
            assert!(turn & RUNNING != 0 && turn >> 1 <= sequence);
        }
    }

    /// Item `sequence` leaves (its holder calls this). Returns the slot of
    /// item `sequence + 1` if it was parked: the caller now holds the gate
    /// for it.
    pub(crate) fn finish(&self, sequence: u64) -> Option<u32> {
        let free = (sequence + 1) << 1;
        self.turn.store(free, Ordering::Release);
        fence(Ordering::SeqCst);
        let place = self.place(sequence + 1);
        let parked = place.load(Ordering::Acquire);
        if parked != EMPTY && self.take(free) {
            place.store(EMPTY, Ordering::Relaxed);
            return Some(parked - 1);
        }
        None
    }
}

/// The state word of an any-order gate: `(announced parked items << 1) |
/// busy`.
const BUSY: u64 = 1;
const ONE_PARKED: u64 = 2;

/// A serial stage that lets items through one at a time, in any order
/// (`serial_out_of_order`; the source, whose items are tokens that want to
/// fetch).
#[repr(C)]
pub(crate) struct AnyOrderGate {
    state: AtomicU64,
    /// A word for the gate's holder, on the state word's cache line, which
    /// the holder owns anyway: the source keeps its next sequence number
    /// here (on a line of its own it cost one more cache miss a batch).
    holder_word: UnsafeCell<u64>,
    parked: ParkedQueue,
}

// SAFETY: the holder word is touched only by the gate's holder (see
// `holder_word`); everything else is atomics and a concurrent queue.
unsafe impl Sync for AnyOrderGate {}

impl AnyOrderGate {
    pub(crate) fn new(tokens: usize) -> Self {
        AnyOrderGate {
            state: AtomicU64::new(0),
            holder_word: UnsafeCell::new(0),
            parked: ParkedQueue::new(tokens),
        }
    }

    /// For a new run. Only while no item is in flight.
    pub(crate) fn reset(&self) {
        self.state.store(0, Ordering::Relaxed);
        // SAFETY: no item in flight: nobody holds the gate.
        unsafe { *self.holder_word.get() = 0 };
        while self.parked.pop().is_some() {}
    }

    /// The holder's word (0 at the start of a run).
    ///
    /// # Safety
    /// The caller holds the gate, or nobody else can take it (a job holding
    /// every token of the run), and keeps no other reference to the word.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn holder_word(&self) -> &mut u64 {
        // SAFETY: per the contract, only the holder touches the word, and
        // taking the gate (an acquire read-modify-write of `state`) orders
        // this holder after the previous one's release.
        unsafe { &mut *self.holder_word.get() }
    }

    /// An item (in slot `slot`) arrives.
    pub(crate) fn arrive(&self, slot: u32) -> Arrival {
        // Straight to the read-modify-write (one transfer of the line, not
        // a read and then an upgrade).
        let mut state =
            match self
                .state
                .compare_exchange(0, BUSY, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Arrival::Enter,
                Err(now) => now,
            };
        // Queued first, announced (or taken) by the read-modify-write.
        self.parked.push(slot);
        loop {
            let busy = state & BUSY != 0;
            let new = if busy {
                state + ONE_PARKED
            } else {
                state | BUSY
            };
            match self
                .state
                .compare_exchange(state, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if busy => return Arrival::Parked,
                Ok(_) => {
                    // The gate is ours (it was left, or not yet taken this
                    // run): run whichever item is first in the queue. Even
                    // if that is our slot, it need not be our item: a
                    // holder may have taken our slot before we announced
                    // it (counting another item's announcement), run it,
                    // and the slot's next item parked here again. Only the
                    // caller's `Switch` path treats the slot as new.
                    let first = self.parked.pop().expect("an item is queued");
                    return Arrival::Switch(first);
                }
                Err(now) => state = now,
            }
        }
    }

    /// The holder leaves. Returns a parked slot if there is one: the
    /// caller now holds the gate for it.
    pub(crate) fn finish(&self) -> Option<u32> {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            // One parked item taken (the gate stays busy for it), or none
            // left: the gate is free.
            let new = state.saturating_sub(ONE_PARKED);
            match self
                .state
                .compare_exchange(state, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if new == 0 => return None,
                Ok(_) => return Some(self.parked.pop().expect("an announced item is queued")),
                Err(now) => state = now,
            }
        }
    }

    /// For the holder, which keeps going (the source fetching for several
    /// tokens): an announced parked slot, if any, while still holding.
    pub(crate) fn pop_parked(&self) -> Option<u32> {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state < ONE_PARKED {
                return None;
            }
            match self.state.compare_exchange(
                state,
                state - ONE_PARKED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(self.parked.pop().expect("an announced item is queued")),
                Err(now) => state = now,
            }
        }
    }
}

/// The parked items of an `AnyOrderGate`: at most one per token, so a
/// bounded queue never overflows. Under loom, a loom-visible stand-in.
pub(crate) struct ParkedQueue {
    #[cfg(not(loom))]
    queue: crossbeam_queue::ArrayQueue<u32>,
    #[cfg(loom)]
    queue: crate::platform::sync::Mutex<std::collections::VecDeque<u32>>,
}

impl ParkedQueue {
    fn new(tokens: usize) -> Self {
        ParkedQueue {
            #[cfg(not(loom))]
            queue: crossbeam_queue::ArrayQueue::new(tokens.max(1)),
            #[cfg(loom)]
            queue: crate::platform::sync::Mutex::new(std::collections::VecDeque::with_capacity(
                tokens,
            )),
        }
    }

    #[cfg(not(loom))]
    fn push(&self, slot: u32) {
        self.queue
            .push(slot)
            .expect("at most one parked item per token");
    }

    #[cfg(not(loom))]
    fn pop(&self) -> Option<u32> {
        self.queue.pop()
    }

    #[cfg(loom)]
    fn push(&self, slot: u32) {
        self.queue.lock().push_back(slot);
    }

    #[cfg(loom)]
    fn pop(&self) -> Option<u32> {
        self.queue.lock().pop_front()
    }
}
