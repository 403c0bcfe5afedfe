//! The whole pipeline as a loop on one worker.
//!
//! A job that holds every token of the run, free, with light items (the
//! measured stage work per item below the sharing threshold) and no stage
//! pinned elsewhere, knows no other job is inside the pipeline: it runs
//! one item at a time through every stage, with no gate and no atomic
//! operation. It keeps the in-order gates' turns and the source's
//! sequence exact as it goes, so that around a parallel stage its free
//! tokens can be lent to idle workers (written once per loop,
//! `prepare_alone_lend`): a taker finds the gates as a normal run would
//! have left them, and this job goes on with its item through the gates
//! like any chain (`Alone::Split`).
//!
//! Invariants: while running alone nothing is lent around a serial stage
//! (it runs without its gate); the job leaves the loop when items turn
//! heavy, with every token free in its chain.

use super::chain::{Chain, Retired};
use super::slot::{Gate, Owned};
use super::{Engine, SAMPLE_EVERY};
use crate::observe::stats::Rule;
use crate::pipeline::stage::Stage;
use crate::platform::unwind;
use crate::worker::thread::{JobRef, WorkerThread};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// How `run_alone` ended.
pub(super) enum Alone {
    /// The source is exhausted or the run cancelled: every token retired.
    Over,
    /// Items turned heavy and should be shared: the chain holds every
    /// token, free, and the gates are as a normal run leaves them.
    Heavy,
    /// An idle worker took the free tokens while a parallel stage ran: the
    /// chain is the one slot, its item at its next stage (or completed).
    Split,
}

impl<'a> Engine<'a> {
    /// Do we hold every token of the run, free, with light items and no
    /// stage pinned elsewhere? Then nobody else is inside the pipeline, and
    /// it can run as a plain loop on this worker (`run_alone`).
    ///
    /// The chain holds only free tokens.
    pub(super) fn alone(&self, chain: &Chain, worker: &WorkerThread) -> bool {
        if worker.tracing() || self.share_items() {
            return false;
        }
        let here = Some(worker.index());
        let pinned_elsewhere = |pin: Option<usize>| pin.is_some() && pin != here;
        if pinned_elsewhere(self.source.pin) || self.stages.iter().any(|s| pinned_elsewhere(s.pin))
        {
            return false;
        }
        let mut count = 0;
        let mut at = self.front(chain);
        while let Some(token) = at {
            count += 1;
            at = self.next_of(token);
        }
        count == self.view.count
    }

    /// The whole pipeline on this worker, one item at a time through every
    /// stage, with no gate and no atomic operation: we hold every token,
    /// so no other job is inside it, and light items are cheaper run here
    /// than moved.
    ///
    /// Each in-order gate's turn is kept exact as items pass (one plain
    /// store), and the source's next sequence number too, so that around a
    /// parallel stage the free tokens can be lent out (`lend`): if an idle
    /// worker takes them while the stage runs, it finds the gates as a
    /// normal run would have left them, and we go on with our item through
    /// the gates like any chain. (Serial stages run without their gates
    /// here, so nothing is lent around them.)
    ///
    /// # Safety
    /// The caller owns the chain, which holds every token of the run, free.
    pub(super) unsafe fn run_alone(
        &self,
        chain: &mut Chain,
        retired: &mut Retired,
        worker: &WorkerThread,
    ) -> Alone {
        let slot = self.front(chain).expect("the chain holds every token");
        let state = slot.state();
        let item = self.item(slot);
        let mut lent = self.prepare_alone_lend(slot);
        let ended = loop {
            if self.cancelled() {
                break Alone::Over;
            }
            // SAFETY: the source is ours alone; the cell fits its item.
            match unwind::halt_unwinding(|| unsafe { self.source.body.fetch(item) }) {
                Ok(true) => {}
                Ok(false) => break Alone::Over,
                Err(payload) => {
                    self.record_panic(payload);
                    break Alone::Over;
                }
            }
            // SAFETY: nobody else fetches while we hold every token (the
            // tokens are lent only after this).
            let sequence = {
                let next = unsafe { self.source_gate().holder_word() };
                *next += 1;
                *next - 1
            };
            state.sequence.set(sequence);
            state.has_item.set(true);
            state.work_ns.set(0);
            state.sampled.set(sequence.is_multiple_of(SAMPLE_EVERY));
            for (index, stage) in self.stages.iter().enumerate() {
                worker.count_task(Rule::Returned);
                if state.has_item.get() && self.cancelled() {
                    self.drop_input(index, slot);
                }
                match self.gate(index) {
                    Gate::Parallel if state.has_item.get() => {
                        // SAFETY: `slot` is at the chain's front, `lent`
                        // from `prepare_alone_lend` for it; the item holds
                        // the stage's input.
                        if unsafe { self.run_body_alone(stage, slot, &mut lent, chain, worker) } {
                            // The free tokens were taken: from here on
                            // the item goes through the gates.
                            state.stage.set(index as u32 + 2);
                            if index + 1 == self.stages.len() {
                                self.complete_item(slot);
                            }
                            return Alone::Split;
                        }
                    }
                    Gate::Parallel => {}
                    Gate::InOrder(gate) => {
                        if state.has_item.get() {
                            // SAFETY: the item holds the stage's input; we
                            // hold every token, so the gate is ours.
                            unsafe { self.run_body(stage, slot) };
                        }
                        // Passed (or skipped, as a dropped item does).
                        gate.skip_to(sequence + 1);
                    }
                    Gate::AnyOrder(_) => {
                        if state.has_item.get() {
                            // SAFETY: as above.
                            unsafe { self.run_body(stage, slot) };
                        }
                    }
                }
            }
            state.stage.set(self.stages.len() as u32 + 1);
            self.complete_item(slot);
            if self.share_items() {
                break Alone::Heavy;
            }
            worker.count_task(Rule::Returned);
        };
        if let Some(job) = lent {
            // SAFETY: never taken (a split returned above): still ours.
            unsafe { job.as_ptr().read() }.discard();
        }
        if let Alone::Heavy = ended {
            return ended;
        }
        // The source is exhausted or the run cancelled.
        self.exhausted.store(true, Ordering::Release);
        self.retire_chain(chain, retired);
        Alone::Over
    }

    /// For `run_alone`: the job of the free tokens behind `slot`, written
    /// once into the slot that heads them, to offer around each parallel
    /// body (the chain behind `slot` does not change while we run alone).
    /// None if there is nothing to lend or nobody to lend it to.
    ///
    fn prepare_alone_lend(&self, slot: Owned<'_>) -> Option<NonNull<JobRef>> {
        if self.workers.load(Ordering::Relaxed) < 2 {
            return None;
        }
        let head = self.next_of(slot)?;
        let cell = head.slot().lent_job.get();
        // SAFETY: ours; nobody reads the cell before it is offered.
        unsafe { (*cell).write(self.job(head)) };
        // SAFETY: written just above.
        Some(NonNull::from(unsafe { &*cell }).cast())
    }

    /// `run_body` for `run_alone`: with the free tokens behind `slot`
    /// offered to idle workers meanwhile. True if one took them: then the
    /// chain is `slot` alone, and `lent` is None.
    ///
    /// # Safety
    /// The caller owns the chain, `slot` at its front; `lent` came from
    /// `prepare_alone_lend` for this chain.
    #[inline]
    unsafe fn run_body_alone(
        &self,
        stage: &Stage<'_>,
        slot: Owned<'_>,
        lent: &mut Option<NonNull<JobRef>>,
        chain: &mut Chain,
        worker: &WorkerThread,
    ) -> bool {
        let Some(job) = *lent else {
            // SAFETY: forwarded.
            unsafe { self.run_body(stage, slot) };
            return false;
        };
        if worker.has_offer_out() {
            // An outer offer of ours is out (this run is inside a body of
            // another): `lend` goes through the deque instead, and leaves
            // the cell alone.
            // The cell's job is ours: out of it while a thief could get
            // the chain (and the cell) by the deque.
            // SAFETY: written by `prepare_alone_lend`, never given away.
            let prepared = unsafe { job.as_ptr().read() };
            let mut before = None;
            // SAFETY: forwarded.
            let split = unsafe { self.run_body_lending(stage, slot, &mut before, chain, worker) };
            if split {
                prepared.discard();
                *lent = None;
            } else {
                // SAFETY: the chain, with the cell, came back to us.
                unsafe { job.as_ptr().write(prepared) };
            }
            return split;
        }
        // SAFETY: the job in the cell is the chain behind `slot`, ours and
        // unchanged until withdrawn or taken; no offer of ours is out.
        let accepted = unsafe { worker.offer_lent(job) };
        debug_assert!(accepted);
        // SAFETY: forwarded.
        unsafe { self.run_body(stage, slot) };
        // SAFETY: after the accepted offer above.
        if unsafe { worker.withdraw_lent() } {
            return false;
        }
        // Taken: the tokens behind are the thief's, with the job's cell.
        *lent = None;
        *chain = Chain::single(slot);
        true
    }
}
