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
//! Both have the same race window, a Dekker pair: an arriving item stores
//! itself, then looks at the gate; a finishing holder frees the gate, then
//! looks for a parked item. All four accesses are SeqCst, so at least one
//! side sees the other, and one compare-exchange decides who takes the
//! item: it is never stranded (parked with the gate free and nobody coming)
//! and never taken twice. `tests/loom_gate.rs` checks both gates with loom;
//! `tests/pipeline.rs` detects two items inside one serial stage.
//!
//! Invariants: at most one holder per gate; a parked item is taken exactly
//! once; `InOrderGate` lets item `s` in only after `s - 1` finished.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

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
    /// Our item stays parked, but we took the gate for this other parked
    /// item (any-order gates only): run the stage on it instead.
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
        InOrderGate {
            turn: AtomicU64::new(0),
            ring: (0..tokens).map(|_| AtomicU32::new(EMPTY)).collect(),
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
        &self.ring[(sequence % self.ring.len() as u64) as usize]
    }

    /// Item `sequence` (in slot `slot`) arrives.
    pub(crate) fn arrive(&self, sequence: u64, slot: u32) -> Arrival {
        let place = self.place(sequence);
        place.store(slot + 1, Ordering::SeqCst);
        let free = sequence << 1;
        if self.turn.load(Ordering::SeqCst) == free
            && self
                .turn
                .compare_exchange(free, free | RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            // Only a later item of this place could write here, and it
            // cannot be in flight before this one has left the pipeline.
            place.store(EMPTY, Ordering::Relaxed);
            return Arrival::Enter;
        }
        Arrival::Parked
    }

    /// Item `sequence` leaves (its holder calls this). Returns the slot of
    /// item `sequence + 1` if it was parked: the caller now holds the gate
    /// for it.
    pub(crate) fn finish(&self, sequence: u64) -> Option<u32> {
        let next = sequence + 1;
        let free = next << 1;
        self.turn.store(free, Ordering::SeqCst);
        let place = self.place(next);
        let parked = place.load(Ordering::SeqCst);
        if parked != EMPTY
            && self
                .turn
                .compare_exchange(free, free | RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            place.store(EMPTY, Ordering::Relaxed);
            return Some(parked - 1);
        }
        None
    }
}

/// A serial stage that lets items through one at a time, in any order
/// (`serial_out_of_order`; the source, whose items are tokens that want to
/// fetch).
pub(crate) struct AnyOrderGate {
    busy: AtomicBool,
    parked: ParkedQueue,
}

impl AnyOrderGate {
    pub(crate) fn new(tokens: usize) -> Self {
        AnyOrderGate {
            busy: AtomicBool::new(false),
            parked: ParkedQueue::new(tokens),
        }
    }

    /// For a new run. Only while no item is in flight.
    pub(crate) fn reset(&self) {
        self.busy.store(false, Ordering::Relaxed);
        while self.parked.pop().is_some() {}
    }

    fn try_take(&self) -> bool {
        !self.busy.load(Ordering::SeqCst)
            && self
                .busy
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// An item (in slot `slot`) arrives.
    pub(crate) fn arrive(&self, slot: u32) -> Arrival {
        if self.try_take() {
            return Arrival::Enter;
        }
        self.parked.push(slot);
        // The holder may have left before our push was visible to it: then
        // the gate is free and a parked item must go in. We take the gate
        // for whichever item is first (ours or another's).
        loop {
            if !self.try_take() {
                return Arrival::Parked;
            }
            match self.parked.pop() {
                Some(first) if first == slot => return Arrival::Enter,
                Some(first) => return Arrival::Switch(first),
                None => {
                    // A holder took every parked item, ours included.
                    self.busy.store(false, Ordering::SeqCst);
                    if self.parked.is_empty() {
                        return Arrival::Parked;
                    }
                }
            }
        }
    }

    /// The holder leaves. Returns a parked slot if there is one: the
    /// caller now holds the gate for it.
    pub(crate) fn finish(&self) -> Option<u32> {
        loop {
            self.busy.store(false, Ordering::SeqCst);
            if self.parked.is_empty() || !self.try_take() {
                return None;
            }
            match self.parked.pop() {
                Some(slot) => return Some(slot),
                // An arriver took its own item back in between.
                None => continue,
            }
        }
    }

    /// For the holder, which keeps going (the source fetching for several
    /// tokens): the next parked slot, if any, while still holding the gate.
    pub(crate) fn pop_parked(&self) -> Option<u32> {
        self.parked.pop()
    }

    /// Park `slot` at a free gate before a run starts (the run's first
    /// arrival takes it). Only while nothing else touches the gate.
    pub(crate) fn arrive_parked(&self, slot: u32) -> Arrival {
        self.parked.push(slot);
        Arrival::Parked
    }
}

/// The parked items of an `AnyOrderGate`: at most one per token, so a
/// bounded queue never overflows. Under loom, a loom-visible stand-in.
pub(crate) struct ParkedQueue {
    #[cfg(not(loom))]
    queue: crossbeam_queue::ArrayQueue<u32>,
    #[cfg(loom)]
    queue: crate::sync::Mutex<std::collections::VecDeque<u32>>,
}

impl ParkedQueue {
    fn new(tokens: usize) -> Self {
        ParkedQueue {
            #[cfg(not(loom))]
            queue: crossbeam_queue::ArrayQueue::new(tokens.max(1)),
            #[cfg(loom)]
            queue: crate::sync::Mutex::new(std::collections::VecDeque::with_capacity(tokens)),
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

    #[cfg(not(loom))]
    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    #[cfg(loom)]
    fn push(&self, slot: u32) {
        self.queue.lock().push_back(slot);
    }

    #[cfg(loom)]
    fn pop(&self) -> Option<u32> {
        self.queue.lock().pop_front()
    }

    #[cfg(loom)]
    fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }
}
