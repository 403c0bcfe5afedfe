//! The source gate and its batches: how a chain of free tokens becomes a
//! chain of items.
//!
//! A job whose chain holds only free tokens takes the source gate (or
//! parks its tokens there, for the holder to fetch into) and fetches a
//! batch: for its own tokens, then for tokens parked at the gate. With
//! light items the batch is every token and the job keeps them all (one
//! worker runs the pipeline; the gates' lines stay on its core); with
//! items that carry enough work it is a share (`tokens / workers`, at
//! most `MAX_SHARED_BATCH`): the fetcher leaves the gate free and puts
//! the remaining tokens (its own and any parked meanwhile) on its deque
//! as a job, which another worker may take to fetch the next batch. The
//! gate is never handed to a queued job: a worker whose items have passed
//! the sink (whose chain is free tokens again) then takes the gate itself
//! at once, instead of parking its tokens behind a job that waits in a
//! deque to be stolen (with more tokens than four a worker, that wait
//! stalled a worker at every batch). A job that holds every token, with
//! light items and nothing pinned elsewhere, runs the whole pipeline as a
//! loop (`alone.rs`).
//!
//! Invariants: only the source gate's holder calls the source and writes
//! the next sequence number; a token that finds the source exhausted (or
//! the run cancelled) retires, and so does every token parked after it.

use super::alone::Alone;
use super::chain::{Chain, Retired};
use super::slot::Owned;
use super::{Engine, SAMPLE_EVERY};
use crate::pipeline::gate::Arrival;
use crate::platform::unwind;
use crate::worker::thread::WorkerThread;
use std::sync::atomic::Ordering;

impl<'a> Engine<'a> {
    /// The chain holds only free tokens: take the source gate and fetch a
    /// batch (see the module documentation). Tokens that find the source
    /// exhausted move to `retired`. Returns whether it fetched anything.
    ///
    pub(super) fn refill(
        &self,
        chain: &mut Chain,
        retired: &mut Retired,
        worker: &WorkerThread,
    ) -> bool {
        let gate = self.source_gate();
        if self.alone(chain, worker) {
            // SAFETY: `alone` found every token of the run in our chain.
            match unsafe { self.run_alone(chain, retired, worker) } {
                Alone::Over | Alone::Split => return true,
                Alone::Heavy => {}
            }
        }
        // Take the gate (or park our tokens at it).
        loop {
            let Some(front) = self.front(chain) else {
                return false;
            };
            let state = front.state();
            if let Some(pin) = self.source.pin
                && pin != worker.index()
                && !state.routed.get()
            {
                // The source runs on its worker: send the tokens there.
                *chain = Chain::EMPTY;
                // SAFETY: ours (with the rest of the chain behind it),
                // given up here.
                unsafe { self.schedule(front, worker) };
                return false;
            }
            state.routed.set(false);
            if self.exhausted.load(Ordering::Acquire) {
                self.retire_chain(chain, retired);
                return false;
            }
            // Off the chain before arriving: a parked token may be taken
            // by the gate's holder at once.
            self.pop_front(chain);
            match gate.arrive(front.index()) {
                Arrival::Enter => {
                    self.push_front(chain, front);
                    break;
                }
                Arrival::Switch(other) => {
                    // Our token is parked now; we fetch for `other`.
                    // SAFETY: the gate made `other` ours.
                    self.push_front(chain, unsafe { self.claim(other) });
                    break;
                }
                Arrival::Parked => {}
            }
        }
        // We hold the source gate. Fetch, in chain order, then for tokens
        // parked at the gate, up to the batch limit.
        // Decided once for the whole batch: a light batch takes every token
        // it holds, and only then may it keep them all (below); another
        // worker's sampled item can flip `share_items` in between.
        let shared = self.share_items();
        let limit = self.batch_limit(worker, shared);
        let mut items = Chain::EMPTY;
        let mut fetched = 0;
        let mut exhausted = false;
        while fetched < limit && !exhausted {
            let token = match self.pop_front(chain) {
                Some(token) => token,
                None => match gate.pop_parked() {
                    // SAFETY: the gate made it ours.
                    Some(parked) => unsafe { self.claim(parked) },
                    None => break,
                },
            };
            // SAFETY: we hold the source gate.
            if unsafe { self.fetch_one(token) } {
                self.push_back(&mut items, token);
                fetched += 1;
            } else {
                exhausted = true;
                retired.push(token);
            }
        }
        if exhausted {
            // Every other token we own or find parked is done too.
            self.retire_chain(chain, retired);
            while let Some(parked) = gate.pop_parked().or_else(|| gate.finish()) {
                // SAFETY: the gate made it ours.
                retired.push(unsafe { self.claim(parked) });
            }
        } else if shared || worker.tracing() {
            // Tokens left over (ours, or parked meanwhile): leave the gate
            // free and make them a job, for another worker to fetch the
            // next batch (it arrives at the gate as any job does).
            let mut rest = std::mem::replace(chain, Chain::EMPTY);
            while let Some(parked) = gate.pop_parked().or_else(|| gate.finish()) {
                // SAFETY: the gate made it ours.
                let token = unsafe { self.claim(parked) };
                self.push_back(&mut rest, token);
            }
            if let Some(next) = self.front(&rest) {
                // SAFETY: ours (with the rest of the old chain behind it),
                // given up here.
                unsafe { self.schedule(next, worker) };
            }
        } else {
            // Light items: we fetch for every token, also those parked
            // while we fetched, and keep them all on this worker. (The
            // limit was every token, so none is left in `chain`.)
            debug_assert!(chain.is_empty(), "a light batch left a token behind");
            while let Some(parked) = gate.finish() {
                // SAFETY: the gate made it ours; we hold the gate again.
                let token = unsafe { self.claim(parked) };
                // SAFETY: we hold the source gate.
                if unsafe { self.fetch_one(token) } {
                    self.push_back(&mut items, token);
                } else {
                    retired.push(token);
                    while let Some(parked) = gate.pop_parked().or_else(|| gate.finish()) {
                        // SAFETY: the gate made it ours.
                        retired.push(unsafe { self.claim(parked) });
                    }
                    break;
                }
            }
        }
        *chain = items;
        fetched > 0
    }

    /// Fetch one item into `slot`: true if it got one. The source counts as
    /// exhausted once it returned `None`, panicked, or the run is cancelled.
    ///
    /// # Safety
    /// The caller holds the source gate.
    unsafe fn fetch_one(&self, slot: Owned<'_>) -> bool {
        let state = slot.state();
        if self.exhausted.load(Ordering::Relaxed) || self.cancelled() {
            self.exhausted.store(true, Ordering::Release);
            return false;
        }
        let item = self.item(slot);
        // SAFETY: we hold the source gate; the cell has room for the
        // source's item.
        match unwind::halt_unwinding(|| unsafe { self.source.body.fetch(item) }) {
            Ok(true) => {
                // SAFETY: the source gate's holder owns the counter.
                let next = unsafe { self.source_gate().holder_word() };
                state.sequence.set(*next);
                *next += 1;
                state.stage.set(1);
                state.has_item.set(true);
                state.work_ns.set(0);
                state
                    .sampled
                    .set(state.sequence.get().is_multiple_of(SAMPLE_EVERY));
                if self.stages.is_empty() {
                    // Nothing after the source: done at once.
                    self.complete_item(slot);
                }
                true
            }
            Ok(false) => {
                self.exhausted.store(true, Ordering::Release);
                false
            }
            Err(payload) => {
                self.record_panic(payload);
                self.exhausted.store(true, Ordering::Release);
                false
            }
        }
    }
}
