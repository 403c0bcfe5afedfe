//! One item through one stage: the gates' protocols on the item's side,
//! the stage body, and what became of the item (`Step`).
//!
//! A parallel stage just runs. At an out-of-order gate the item enters or
//! parks; at an in-order gate it enters on its turn, waits in its chain
//! (not forced: items behind it may run first) or parks (forced). The
//! worker that leaves a serial stage takes the next parked item (rule 2,
//! `hand_over`), and passes an in-order gate straight on to the next item
//! of its own chain when that one is next in sequence (a reservation, no
//! read-modify-write). A dropped item (filtered, cancelled, panicked)
//! still passes the in-order gates after it, without running them.
//!
//! Invariants: a parked item belongs to the gate from the moment it
//! arrives, so nothing of it is written after `arrive`; a gate is held by
//! exactly one job, which runs the stage body and then hands the gate on.

use super::Engine;
use super::UNMEASURED;
use super::chain::Chain;
use super::slot::{Gate, NO_GATE, NO_SLOT, Owned};
use crate::pipeline::gate::Arrival;
use crate::pipeline::stage::Stage;
use crate::platform::unwind;
use crate::worker::thread::WorkerThread;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What one step of the front slot (taken off the chain for the step) led
/// to.
pub(super) enum Step<'e> {
    /// The item went on: it is the front again.
    Same,
    /// It left the chain (parked in a gate, routed to a pinned worker).
    Gone,
    /// It passed the last stage: its token goes to the back.
    Completed,
    /// It stays parked, and this other item, whose gate we now hold, takes
    /// its place at the front.
    Replaced(Owned<'e>),
    /// Not its turn at an in-order gate yet: it keeps its place (and its
    /// token stays with this worker) while items behind it with stages to
    /// run go first; it parks only when nothing else is left to do.
    Wait,
}

impl<'a> Engine<'a> {
    /// Advance the item in `slot` (in the chain, right behind `before`) by
    /// one stage. With `force`, an item that is not yet its turn at an
    /// in-order gate parks there; without, it just waits in the chain. An
    /// item at stage `blocked_at` waits without a look at the turn: an item
    /// ahead of it in the chain waits there. If the rest of the chain was
    /// taken while the stage ran (`lend`), the chain is `slot` alone (and
    /// what a gate handed over behind it), and `before` is `None`.
    ///
    /// # Safety
    /// The caller owns the chain.
    pub(super) unsafe fn step<'e>(
        &'e self,
        slot: Owned<'e>,
        before: &mut Option<Owned<'e>>,
        chain: &mut Chain,
        worker: &WorkerThread,
        force: bool,
        blocked_at: u32,
    ) -> Step<'e> {
        let state = slot.state();
        let index = state.stage.get() as usize - 1;
        debug_assert!(index < self.stages.len());
        // SAFETY: a slot's stage number is 1..=n between fetch and
        // completion (0 means a free token, handled by the caller).
        let stage = unsafe { self.stages.get_unchecked(index) };
        if let Some(pin) = stage.pin
            && pin != worker.index()
            && !state.routed.get()
        {
            // Off to the pinned worker, as a chain of its own.
            state.next.set(NO_SLOT);
            // SAFETY: ours, given up here.
            unsafe { self.schedule(slot, worker) };
            return Step::Gone;
        }
        state.routed.set(false);
        if state.has_item.get() && self.cancelled() {
            self.drop_input(index, slot);
        }
        let last = index + 1 == self.stages.len();
        let gate = self.gate(index);
        // Only an item that found an in-order gate closed waits, at that
        // gate: a flag left over from an earlier stage would make the chain's
        // loop pass the item over (`runnable_behind`).
        debug_assert!(!state.waiting.get() || matches!(gate, Gate::InOrder(_)));
        match gate {
            Gate::Parallel => {
                if state.has_item.get() {
                    // SAFETY: the chain is ours, `slot` in it behind `before`.
                    unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                }
            }
            Gate::AnyOrder(gate) => {
                let held = state.held_gate.get() == state.stage.get();
                if !state.has_item.get() && !held {
                    // A dropped item needs no turn here. (One that was
                    // handed the gate before it was dropped must pass the
                    // gate on below.)
                } else {
                    if !held {
                        match gate.arrive(slot.index()) {
                            Arrival::Enter => {}
                            Arrival::Parked => return Step::Gone,
                            Arrival::Switch(other) => {
                                // We hold the gate for the first parked
                                // item: it takes our place in the chain,
                                // linked to `behind` (read before this
                                // step). It may be our slot with a newer
                                // item: ours ran meanwhile (see `Arrival`).
                                // SAFETY: the gate made it ours.
                                let other = unsafe { self.claim(other) };
                                let other_state = other.state();
                                other_state.held_gate.set(other_state.stage.get());
                                return Step::Replaced(other);
                            }
                        }
                    }
                    state.held_gate.set(NO_GATE);
                    if state.has_item.get() {
                        // SAFETY: as above.
                        unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                    }
                    if let Some(next) = gate.finish() {
                        // SAFETY: the gate handed `next` to us.
                        unsafe { self.hand_over(chain, slot, next, worker) };
                    }
                }
            }
            Gate::InOrder(gate) => {
                if state.held_gate.get() == state.stage.get() {
                    state.held_gate.set(NO_GATE);
                } else if state.reserved_gate.get() == state.stage.get() {
                    state.reserved_gate.set(NO_GATE);
                } else {
                    if !force {
                        // Not forced: enter only if it is our turn now, with
                        // one read-modify-write (a read first, then the
                        // write, moved the gate's line between the cores
                        // twice).
                        if state.stage.get() == blocked_at || !gate.try_enter(state.sequence.get())
                        {
                            state.waiting.set(true);
                            return Step::Wait;
                        }
                        state.waiting.set(false);
                    } else {
                        // Before arriving: once parked, the slot is the gate
                        // holder's (Miri caught this write made after).
                        state.waiting.set(false);
                        match gate.arrive(state.sequence.get(), slot.index()) {
                            Arrival::Enter => {}
                            Arrival::Parked | Arrival::Switch(_) => return Step::Gone,
                        }
                    }
                }
                // Looked at again now that we hold the gate: the look at
                // the top of the step came before we waited for our turn,
                // and an item before us may have been dropped by a
                // cancellation since. Entering comes after that item left
                // (the turn word orders the two), so this look sees the
                // cancellation, and no item passes after a gap.
                if state.has_item.get() && self.cancelled() {
                    self.drop_input(index, slot);
                }
                if state.has_item.get() {
                    // SAFETY: as above.
                    unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                }
                if let Some(next) = self.next_in_chain_is(slot, state.sequence.get() + 1) {
                    // The next item is ours, right behind: keep the gate
                    // for it (one read-modify-write instead of two, and
                    // none when it arrives).
                    gate.pass_on(state.sequence.get());
                    next.state().reserved_gate.set(state.stage.get());
                } else if let Some(next) = gate.finish(state.sequence.get()) {
                    // SAFETY: the gate handed `next` to us.
                    unsafe { self.hand_over(chain, slot, next, worker) };
                }
            }
        }
        state.stage.set(state.stage.get() + 1);
        // It passed: whatever gate it once waited at (an item let in by a
        // hand-over or a reservation skips the code that clears it above).
        state.waiting.set(false);
        if last {
            self.complete_item(slot);
            return Step::Completed;
        }
        Step::Same
    }

    /// If the front waits for its turn at an in-order gate: the first item
    /// behind it with a stage to run before that gate, and the slot before
    /// that item in the chain. (None if the front does not wait or nothing
    /// behind it can run.) The turn is not looked at: the items behind run
    /// up to the gate first, and the front tries it when nothing else is
    /// left, so the gate's word is tried once a batch rather than once an
    /// item (each read of it, written by another worker, is a cache miss).
    ///
    /// An item behind that already found its own in-order gate closed
    /// (`waiting`) is passed over: it is tried again only as the front,
    /// where it is forced to enter or park. Picking it again would retry
    /// the same closed gate forever when the item whose turn comes first
    /// sits further back in this chain (an any-order gate hands its next
    /// item in right behind the one that finished, so a chain need not be
    /// in source order), and nothing behind it, nor the front, would run.
    ///
    /// `resume_after`, if given, is a slot of the chain behind the front
    /// such that every item from the front to it is passed over (the
    /// caller's note of where the last walk for this same waiting front
    /// stopped): the walk starts behind it. Without it, walking from the
    /// front each time made a batch of k items cost k * k / 2 slot visits.
    pub(super) fn runnable_behind<'e>(
        &'e self,
        front: Owned<'e>,
        resume_after: Option<u32>,
    ) -> Option<(Owned<'e>, Option<Owned<'e>>)> {
        let waits_at = front.state();
        if !waits_at.waiting.get() {
            return None;
        }
        let mut prev = match resume_after {
            // SAFETY: the caller's slot is in our chain, so ours.
            Some(index) => unsafe { self.claim(index) },
            None => front,
        };
        while let Some(slot) = self.next_of(prev) {
            let stage = slot.state().stage.get();
            if stage == 0 {
                return None;
            }
            if stage < waits_at.stage.get() && !slot.state().waiting.get() {
                return Some((slot, Some(prev)));
            }
            prev = slot;
        }
        None
    }

    /// The item behind `front` in its chain, if it is the one with sequence
    /// `sequence` and holds no reservation already. (Used right after
    /// `front` passed an in-order gate, so that one cannot have passed it.)
    fn next_in_chain_is(&self, front: Owned<'_>, sequence: u64) -> Option<Owned<'_>> {
        self.next_of(front).filter(|next| {
            let next = next.state();
            next.stage.get() != 0
                && next.sequence.get() == sequence
                && next.reserved_gate.get() == NO_GATE
        })
    }

    /// A serial stage handed us the next parked item (rule 2): it joins our
    /// chain right behind the current item, or, when items are shared
    /// between workers, becomes a job of its own on our deque.
    ///
    /// # Safety
    /// The gate made `next` ours.
    unsafe fn hand_over(
        &self,
        chain: &mut Chain,
        current: Owned<'_>,
        next: u32,
        worker: &WorkerThread,
    ) {
        // SAFETY: handed to us by the gate.
        let next = unsafe { self.claim(next) };
        let state = next.state();
        state.held_gate.set(state.stage.get());
        // Shared only if a parallel stage is still ahead of it, where
        // another worker could help; a serial tail (the usual sink) stays
        // here, next to the gate's state.
        if self.share_items() && self.parallel_after(state.stage.get()) {
            state.next.set(NO_SLOT);
            // SAFETY: ours, given up here.
            unsafe { self.schedule(next, worker) };
        } else {
            self.insert_after(chain, current, next);
        }
    }

    /// The item passed every stage: drop what it holds and note its work.
    pub(super) fn complete_item(&self, slot: Owned<'_>) {
        let state = slot.state();
        if state.has_item.get() {
            let drop_output = match self.stages.last() {
                Some(stage) => stage.drop_output,
                None => self.source.drop_output,
            };
            if let Some(drop_output) = drop_output {
                // SAFETY: an item that has passed every stage holds the
                // last stage's output, dropped once.
                unsafe { drop_output(self.item(slot)) };
            }
            state.has_item.set(false);
        }
        if state.sampled.get() {
            let sample = u32::try_from(state.work_ns.get()).unwrap_or(u32::MAX - 1);
            let old = self.work_per_item.load(Ordering::Relaxed);
            let new = if old == UNMEASURED {
                sample.max(1)
            } else {
                ((u64::from(old) * 3 + u64::from(sample)) / 4) as u32
            };
            self.work_per_item.store(new, Ordering::Relaxed);
        }
        state.stage.set(0);
    }

    /// Drop the value an item holds before stage `index` runs, and note
    /// that it holds none.
    pub(super) fn drop_input(&self, index: usize, slot: Owned<'_>) {
        let drop_input = match index {
            0 => self.source.drop_output,
            k => self.stages[k - 1].drop_output,
        };
        if let Some(drop_input) = drop_input {
            // SAFETY: before stage `index` the item holds the previous
            // stage's output, dropped once (`has_item` is cleared below).
            unsafe { drop_input(self.item(slot)) };
        }
        slot.state().has_item.set(false);
    }

    /// Run the stage's closure on the item, catching a panic; time it for
    /// a sampled item.
    ///
    /// # Safety
    /// The item holds the stage's input, and a serial stage's gate is held
    /// by this job.
    #[inline]
    pub(super) unsafe fn run_body(&self, stage: &Stage<'_>, slot: Owned<'_>) {
        let state = slot.state();
        let item = self.item(slot);
        let timer = if state.sampled.get() {
            Some(Instant::now())
        } else {
            None
        };
        // SAFETY: per the contract.
        match unwind::halt_unwinding(|| unsafe { stage.body.call(item) }) {
            Ok(()) => {
                if let Some(flatten) = stage.flatten {
                    // SAFETY: the body left its `Option<T>` output there.
                    state.has_item.set(unsafe { flatten(item) });
                }
            }
            Err(payload) => {
                // The input was moved into the closure: nothing is left.
                state.has_item.set(false);
                self.record_panic(payload);
            }
        }
        if let Some(start) = timer {
            state
                .work_ns
                .set(state.work_ns.get() + start.elapsed().as_nanos() as u64);
        }
    }
}
